# SPDX-License-Identifier: GPL-3.0-or-later
"""What every benchmark's plot does the same way: matplotlib without a screen, and the PNG written.

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
    from plotting import pyplot, save
"""


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display on the project's machines)."""
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    return plt


def save(fig, png):
    fig.tight_layout()
    fig.savefig(png)
    print("wrote %s" % png)
