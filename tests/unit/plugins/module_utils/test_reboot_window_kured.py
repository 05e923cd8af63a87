# SPDX-License-Identifier: GPL-3.0-or-later
"""kured's own time-window table, case by case, against _reboot.gate.Window's default reading.

Transcribed from kured's pkg/timewindow/timewindow_test.go (TestTimeWindows, kubereboot/kured at
51220cc, 2026-08-10): the days, start, end and location of each window, and for each time (written
in the location's abbreviation, as Go's time.ParseInLocation reads "2006/01/02 15:04 MST") whether
Contains says it is inside. The table has 42 times in 8 windows; the wrapping ones ("9pm"-"5am",
"11:59pm"-"00:01am") are where the day of a window past midnight matters: kured's is the day of the
current local time. The same table under ``wrap="opening_day"`` differs in exactly those cases.
"""

import datetime

import pytest

from ansible_collections.nodefix.k8s.plugins.module_utils._reboot import gate as reboot_gate_lib

# Go's ParseInLocation with a zone abbreviation the location knows takes that abbreviation's offset
OFFSETS = {"PDT": -7, "PST": -8, "UTC": 0}

KURED = [
    ("mon,tue,wed,thu,fri", "9am", "5pm", "America/Los_Angeles", [
        ("2019/03/31 10:00 PDT", False),
        ("2019/04/04 00:49 PDT", False),
        ("2019/04/04 12:00 PDT", True),
        ("2019/04/04 11:59 UTC", False),
        ("2019/04/05 08:59 PDT", False),
        ("2019/04/05 9:01 PDT", True),
    ]),
    ("mon,we,fri", "10:01", "11:30am", "America/Los_Angeles", [
        ("2019/04/05 10:30 PDT", True),
        ("2019/04/06 10:30 PDT", False),
        ("2019/04/07 10:30 PDT", False),
        ("2019/04/08 10:30 PDT", True),
        ("2019/04/09 10:30 PDT", False),
        ("2019/04/10 10:30 PDT", True),
        ("2019/04/11 10:30 PDT", False),
    ]),
    ("mo,tu,we,th,fr", "00:00", "23:59:59", "UTC", [
        ("2019/04/18 00:00 UTC", True),
        ("2019/04/18 23:59 UTC", True),
    ]),
    ("mon,tue,wed,thu,fri", "9pm", "5am", "America/Los_Angeles", [
        ("2019/03/30 04:00 PDT", False),
        ("2019/03/31 10:00 PDT", False),
        ("2019/03/31 22:00 PDT", False),
        ("2019/04/04 00:49 PDT", True),
        ("2019/04/04 12:00 PDT", False),
        ("2019/04/04 22:49 PDT", True),
        ("2019/04/05 00:49 PDT", True),
        ("2019/04/05 08:59 PDT", False),
        ("2019/04/05 9:01 PDT", False),
    ]),
    ("mon,tue,wed,thu,fri", "11:59pm", "00:01am", "America/Los_Angeles", [
        ("2019/04/04 23:58 PDT", False),
        ("2019/04/04 23:59 PDT", True),
        ("2019/04/05 00:00 PDT", True),
        ("2019/04/05 00:01 PDT", True),
        ("2019/04/05 00:02 PDT", False),
    ]),
    ("mon,tue,wed,fri", "11:59pm", "00:01am", "America/Los_Angeles", [
        ("2019/04/04 23:58 PDT", False),
        ("2019/04/04 23:59 PDT", False),   # Thursday is not one of the days
        ("2019/04/05 00:00 PDT", True),
        ("2019/04/05 00:02 PDT", False),
    ]),
    ("mon,tue,wed,thu", "11:59pm", "00:01am", "America/Los_Angeles", [
        ("2019/04/04 23:58 PDT", False),
        ("2019/04/04 23:59 PDT", True),
        ("2019/04/05 00:00 PDT", False),   # Friday is not one of the days
        ("2019/04/05 00:02 PDT", False),
    ]),
    ("mon,tue,wed,thu,fri", "11:59pm", "00:01am", "UTC", [
        ("2019/04/04 23:58 UTC", False),
        ("2019/04/04 23:59 UTC", True),
        ("2019/04/05 00:00 UTC", True),
        ("2019/04/05 00:01 UTC", True),
        ("2019/04/05 00:02 UTC", False),
    ]),
]

CASES = [(days, start, end, loc, when, expected)
         for days, start, end, loc, times in KURED for when, expected in times]
# the cases where the day of a window past midnight decides, and the opening day's reading differs
OPENING_DAY_DIFFERS = {
    ("mon,tue,wed,thu,fri", "9pm", "5am", "2019/03/30 04:00 PDT"),      # Saturday 04:00: Friday's night
    ("mon,tue,wed,fri", "11:59pm", "00:01am", "2019/04/05 00:00 PDT"),  # Friday 00:00: Thursday's night
    ("mon,tue,wed,thu", "11:59pm", "00:01am", "2019/04/05 00:00 PDT"),  # Friday 00:00: Thursday's night
}


def parse(text):
    """A kured test time ("2019/04/05 9:01 PDT") as an aware UTC datetime."""
    stamp, abbreviation = text.rsplit(" ", 1)
    local = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M")
    return (local - datetime.timedelta(hours=OFFSETS[abbreviation])).replace(tzinfo=datetime.timezone.utc)


def test_the_table_is_kureds_whole_table():
    assert len(KURED) == 8 and len(CASES) == 42
    assert all(parse(when).astimezone(reboot_gate_lib.zone(loc)).tzname() == when.rsplit(" ", 1)[1]
               for days, start, end, loc, when, expected in CASES if not when.endswith("UTC"))


@pytest.mark.parametrize("days, start, end, loc, when, expected", CASES,
                         ids=["%s %s-%s %s @ %s" % c[:5] for c in CASES])
def test_kureds_time_window_table(days, start, end, loc, when, expected):
    window = reboot_gate_lib.Window(days.split(","), start, end, loc)   # the default reading
    assert window.contains(parse(when)) is expected


@pytest.mark.parametrize("days, start, end, loc, when, expected", CASES,
                         ids=["%s %s-%s %s @ %s" % c[:5] for c in CASES])
def test_the_opening_day_reading_differs_only_where_the_day_of_a_wrap_decides(days, start, end, loc, when, expected):
    window = reboot_gate_lib.Window(days.split(","), start, end, loc, wrap="opening_day")
    differs = (days, start, end, when) in OPENING_DAY_DIFFERS
    assert window.contains(parse(when)) is (expected != differs)
