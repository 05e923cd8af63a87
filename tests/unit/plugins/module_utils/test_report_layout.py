# SPDX-License-Identifier: GPL-3.0-or-later
"""The HTML report as a person reads it: laid out by headless Chromium at 1280 px and at a phone's 390 px.

The pages are made by the report's own code (build_model and to_html, what audit_report writes) from a
fleet that stresses the layout: EKS-style node names (ip-10-0-123-45.eu-west-1.compute.internal), one node
with every finding id the collection has (docs/findings.md, 53 today), a 349-character failure message,
a 300-character token (in a failure message, an evidence value and a remediation action), kubespray
suggestions with nested values and a rollout the storm breaker stopped.

One Chromium start measures every page at both widths: each page is an ``srcdoc`` iframe of the width
under test in one harness page, whose script measures the frames' DOM after load and writes the results
into its own DOM, which ``--dump-dom`` prints. Measured per page and width:

- the page's horizontal overflow (documentElement.scrollWidth - clientWidth): 0, wide tables scroll in their
  own box;
- every word in one line box: where the laid-out text breaks a word (a run between white space) across lines,
  the break must be one the browser itself allows there - found by laying the word out alone in a box of no
  width with overflow-wrap and word-break normal (it then breaks at every opportunity: after a '-', before a
  '<' after a ':', ...) - or a text-node boundary (a ``<wbr>``: where the report lets an id or a node name break,
  after '.', '_' and '/'). Range.getClientRects() of each character tells the lines. A run longer than 60
  characters with no opportunity is a token that must wrap instead: no line of any text wider than the window.
- at 1280 px, that every table fits its box (the matrix with all the ids); on the phone they scroll in it.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.nodefix.k8s.plugins.module_utils._report import console as report_console
from ansible_collections.nodefix.k8s.plugins.module_utils._report import document as report_document
from ansible_collections.nodefix.k8s.plugins.module_utils._report import model as report_model
from ansible_collections.nodefix.k8s.plugins.module_utils._report import html_page as report_html_page
from ansible_collections.nodefix.k8s.plugins.module_utils._rollout import storm as report_storm
from ansible_collections.nodefix.k8s.plugins.module_utils._kubelet import durable as kubelet_durable
from ansible_collections.nodefix.k8s.plugins.module_utils._core.text import yaml_flow as text_yaml_flow

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
WIDTHS = (1280, 390)
LONG_TOKEN = 60  # characters: a longer run without a break opportunity is a token that must wrap


def catalogue():
    """{id: (severity, title, remedy)} of every finding id docs/findings.md lists (generated from the registries)."""
    rows = {}
    with open(os.path.join(ROOT, "docs", "findings.md"), encoding="utf-8") as fh:
        for line in fh:
            found = re.match(r"^\| `([a-z0-9_]+\.[a-z0-9_.]+)` \| ([a-z]+) \| (.*?) \| (.*?) \| (.*) \|$", line)
            if found:
                rows[found.group(1)] = (found.group(2), found.group(4), found.group(5))
    return rows


IDS = catalogue()
TOKEN = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(5))[:300]
FAILURE = ("non-zero return code: error when evicting pods/\"payments-api-7d9f8b6c5d-x2x4q\" -n \"payments\": "
           "Cannot evict pod as it would violate the pod's disruption budget. The drain of "
           "ip-10-0-123-45.eu-west-1.compute.internal gave up after 300 s; the node stays cordoned "
           "(nodefix.k8s/cordoned-by annotation kept), containerd.version_below_minimum is still open")
KUBESPRAY = {"memory.available": "500Mi", "nodefs.available": "10%", "imagefs.available": "15%"}


def node_name(i):
    return "ip-10-0-%d-%d.eu-west-1.compute.internal" % (100 + i, 10 + i * 7 % 90)


def finding(fid, subject=None, evidence=None):
    severity, title, remedy = IDS[fid]
    return {"id": fid, "severity": severity, "title": title, "remedy": remedy, "subject": subject,
            "check": fid.split(".", 1)[0], "evidence": evidence or {"value": 1},
            "fix": {"role": "nodefix.k8s.kubelet", "tag": "kubelet_config"}}


def fleet(count=24):
    """{host: node_audit result}: node 0 with every finding id, the rest a few each, one in error."""
    ids = sorted(IDS)
    results = {}
    for i in range(count):
        if i == 0:
            found = [finding(fid, evidence={"token": TOKEN} if j == 0 else None) for j, fid in enumerate(ids)]
        else:
            found = [finding(ids[(i * 5 + k) % len(ids)], subject="sb%d" % k) for k in range(i % 4)]
        results[node_name(i)] = {"findings": found, "checks": {}}
    results[node_name(count - 1)] = {"failed": True, "msg": FAILURE}
    results[node_name(count - 2)] = {"failed": True, "msg": "token refused: %s" % TOKEN}
    return results


def kubelet_checks(eviction):
    return {"kubelet": {"kubelet": {"effective": {
        "evictionHard": {"value": eviction, "source": "config", "path": "/etc/kubernetes/kubelet-config.yaml"},
        "maxPods": {"value": 110, "source": "default"}}}}}


def not_durable():
    """{setting: where to make it durable} as remediate records it, from the kubelet role's own wording."""
    plan = kubelet_durable.durability("kubespray", {"evictionHard": KUBESPRAY, "evictionSoft": KUBESPRAY},
                                      dict((f, {"path": kubelet_durable.KUBESPRAY_CONFIG})
                                           for f in ("evictionHard", "evictionSoft")))
    return dict((s["field"], s["durable_in"]) for s in plan["settings"])


def remediation_pages():
    """(before/after model, stopped-rollout model) of a remediation over the fleet."""
    before = fleet()
    after = {}
    remediation = {}
    for i, host in enumerate(sorted(before)):
        res = dict(before[host])
        if "findings" in res:
            res = {"findings": res["findings"][::2], "checks": kubelet_checks(dict(KUBESPRAY, **{"pid.available": "5%"}))}
            before[host] = dict(before[host], checks=kubelet_checks({"memory.available": "100Mi"}))
        after[host] = res
        remediation[host] = {"status": "failed" if i % 3 == 0 else "ok", "seconds": 41.5 + i,
                             "msg": FAILURE if i % 3 == 0 else None, "roles": ["nodefix.k8s.kubelet"],
                             "not_durable": not_durable(),
                             "actions": ["restarted the kubelet", "kept %s" % TOKEN] if i == 1 else
                             ["restarted the kubelet"]}
    done = report_model.build_model(after, before=before, remediation=remediation, title="nodefix.k8s remediation",
                                    generated="2026-11-27T14:00:00Z")
    # the storm breaker stopped the rollout: every host "not run", the fleet-wide findings named
    plans = dict((h, {"disruptive": ["drain", "restart"], "findings": sorted(IDS)}) for h in before)
    verdict = report_storm.verdict({"run": report_storm.record("run", plans, "t")}, 20)
    stopped = dict((h, {"not_run": True, "msg": "not run: %s" % verdict["msg"]}) for h in before)
    halted = report_model.build_model(stopped, before=before, remediation=dict((h, {"not_run": True}) for h in before),
                                      title="nodefix.k8s remediation", storm=verdict)
    return done, halted


def pages():
    done, halted = remediation_pages()
    waivers = [{"id": "kernel.*", "hosts": [node_name(i) for i in range(1, 12)],
                "reason": "kernel upgrades wait for the vendor's AMI (OPS-1234, image digest %s)" % TOKEN}]
    audit = report_model.build_model(fleet(), title="nodefix.k8s fleet audit", generated="2026-11-27T14:00:00Z",
                                     waivers=waivers)
    return {"audit": report_html_page.to_html(audit), "remediation": report_html_page.to_html(done),
            "stopped": report_html_page.to_html(halted)}


MEASURE_JS = r"""
function starts(doc, node, begin, end, key) {
  // {offset from begin: 1} where a line of the laid-out text node starts within [begin, end)
  var range = doc.createRange(), out = {}, last = null;
  for (var i = begin; i < end; i++) {
    range.setStart(node, i); range.setEnd(node, i + 1);
    var r = range.getClientRects()[0];
    if (!r || !r.width) continue;
    var at = Math.round(key(r));
    if (last !== null && Math.abs(at - last) > 1) out[i - begin] = 1;
    last = at;
  }
  return out;
}
function measure(doc) {
  var root = doc.documentElement, vw = root.clientWidth, win = doc.defaultView;
  var out = {overflow: root.scrollWidth - root.clientWidth, broken: [], unwrapped: [], texts: 0,
             matrix: doc.querySelectorAll('#matrix thead th.rot').length, boxes: {}};
  doc.querySelectorAll('.scroll > table[id]').forEach(function (t) {
    out.boxes[t.id] = t.parentElement.scrollWidth - t.parentElement.clientWidth;   // how far it scrolls
  });
  // the browser's own break opportunities in a text: where it breaks the text in a box of no width,
  // with no emergency breaking (overflow-wrap and word-break normal)
  var probe = doc.createElement('div');
  probe.style.cssText = 'position:absolute;left:0;top:0;width:0;overflow-wrap:normal;word-break:normal;' +
                        'white-space:normal;writing-mode:horizontal-tb;visibility:hidden';
  doc.body.appendChild(probe);
  var walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_TEXT), node, nodes = [];
  while ((node = walker.nextNode())) nodes.push(node);
  nodes.forEach(function (node) {
    var el = node.parentElement;
    if (!el || el === probe || el.closest('script,style') || !node.data.trim()) return;
    var whole = doc.createRange();
    whole.selectNodeContents(node);
    var rects = Array.prototype.filter.call(whole.getClientRects(), function (r) { return r.width > 0 && r.height > 0; });
    if (!rects.length) return;
    out.texts++;
    rects.forEach(function (r) {
      if (r.width > vw) out.unwrapped.push(node.data.trim().slice(0, 40) + '... ' + Math.round(r.width) + 'px');
    });
    var vertical = win.getComputedStyle(el).writingMode.indexOf('vertical') === 0;
    var key = vertical ? function (r) { return r.left; } : function (r) { return r.top; };
    var lines = {};
    rects.forEach(function (r) { lines[Math.round(key(r))] = 1; });
    if (Object.keys(lines).length < 2) return;
    var style = win.getComputedStyle(el), word = /\S+/g, m;
    probe.style.fontFamily = style.fontFamily; probe.style.fontSize = style.fontSize;
    probe.style.fontWeight = style.fontWeight;
    while ((m = word.exec(node.data))) {
      // a word (between white space) on one line is whole; one on several lines is checked character by character
      var range = doc.createRange();
      range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
      var on = {};
      Array.prototype.forEach.call(range.getClientRects(), function (r) { if (r.width > 0) on[Math.round(key(r))] = 1; });
      if (Object.keys(on).length < 2) continue;
      probe.textContent = m[0];
      var allowed = starts(doc, probe.firstChild, 0, m[0].length, function (r) { return r.top; });
      var real = starts(doc, node, m.index, m.index + m[0].length, key);
      Object.keys(real).forEach(function (at) {
        var i = +at;
        if (allowed[i]) return;
        var from = i, to = i;
        while (from > 0 && !allowed[from]) from--;
        while (to < m[0].length && !allowed[to]) to++;
        if (to - from > LONG) return;   // a token longer than any line: it must wrap (see unwrapped)
        out.broken.push(el.tagName.toLowerCase() + (el.className ? '.' + el.className : '') + ': ' +
                        m[0].slice(from, i) + '|' + m[0].slice(i, to));
      });
    }
  });
  probe.remove();
  return out;
}
window.addEventListener('load', function () {
  var res = {};
  document.querySelectorAll('iframe').forEach(function (f) {
    res[f.getAttribute('data-page') + '@' + f.getAttribute('width')] = measure(f.contentDocument);
  });
  document.getElementById('out').textContent = JSON.stringify(res);
});
""".replace("LONG", str(LONG_TOKEN))


def _attr(text):
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def layout(rendered, workdir):
    """{"<page>@<width>": {overflow, broken, unwrapped, words, matrix}} as Chromium lays the pages out."""
    chromium = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    assert chromium, "chromium is installed by scripts/setup.sh"
    frames = "".join('<iframe data-page="%s" width="%d" height="1200" style="border:0;display:block" srcdoc="%s">'
                     '</iframe>' % (name, width, _attr(html)) for name, html in sorted(rendered.items())
                     for width in WIDTHS)
    harness = os.path.join(str(workdir), "harness.html")
    with open(harness, "w", encoding="utf-8") as fh:
        fh.write('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><pre id="out"></pre>%s'
                 '<script>%s</script></body></html>' % (frames, MEASURE_JS))
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--hide-scrollbars", "--user-data-dir=%s" % os.path.join(str(workdir), "chromium"),
                           "--window-size=1280,900", "--virtual-time-budget=10000", "--dump-dom", "file://%s" % harness],
                          capture_output=True, timeout=180, check=False)
    found = re.search(r'<pre id="out">(.*?)</pre>', proc.stdout.decode("utf-8", "replace"), re.S)
    assert found and found.group(1), "Chromium did not lay out the pages: %s" % proc.stderr.decode()[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    return layout(pages(), tmp_path_factory.mktemp("layout"))


def test_the_fleet_has_every_finding_id_the_collection_has():
    assert len(IDS) >= 53 and len(FAILURE) == 349 and len(TOKEN) == 300
    assert "containerd.version_below_minimum" in IDS


@pytest.mark.parametrize("page", ["audit", "remediation", "stopped"])
@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_overflows_the_window(measured, page, width):
    got = measured["%s@%d" % (page, width)]
    assert got["texts"] > 500, got   # the page was laid out
    assert got["overflow"] == 0, "the %s report overflows a %d-pixel window by %d px" % (page, width, got["overflow"])


@pytest.mark.parametrize("page", ["audit", "remediation", "stopped"])
@pytest.mark.parametrize("width", WIDTHS)
def test_no_word_is_broken_inside_and_long_tokens_wrap(measured, page, width):
    got = measured["%s@%d" % (page, width)]
    assert not got["broken"], "%d word(s) broken across lines at %d px: %s" % (
        len(got["broken"]), width, got["broken"][:15])
    assert not got["unwrapped"], got["unwrapped"]


@pytest.mark.parametrize("width", WIDTHS)
def test_the_matrix_has_every_finding_id(measured, width):
    assert measured["audit@%d" % width]["matrix"] == len(IDS)


@pytest.mark.parametrize("page", ["audit", "remediation", "stopped"])
def test_at_1280_px_every_table_fits_without_scrolling(measured, page):
    """The matrix with all the finding ids, the before/after table with EKS names and ids: read at a glance
    at 1280 px (each table is in a box that would scroll, and none needs to); on a phone they scroll."""
    boxes = measured["%s@1280" % page]["boxes"]
    assert "groups" in boxes and "matrix" in boxes, boxes
    assert all(v == 0 for v in boxes.values()), boxes
    assert any(v > 0 for v in measured["%s@390" % page]["boxes"].values())   # the phone's boxes do scroll


def test_nested_values_read_as_yaml_in_every_format():
    """A kubespray suggestion with a map value, and a changed value nested deeper than the rows go, as YAML a
    person pastes (the inventory's own syntax) in Markdown, HTML and the console table - never a Python repr
    (``{'memory.available': '500Mi', ...}``)."""
    done, _halted = remediation_pages()
    deep_b = {"options": {"json": {"split": {"stream": "stderr", "bufferSize": "0"}}}}
    deep_a = {"options": {"json": {"split": {"stream": "stdout", "bufferSize": "0"}}}}
    node = done["nodes"][1]
    node["changes"] = node["changes"] + report_model.changes(
        {"kubelet": {"kubelet": {"effective": {"logging": {"value": deep_b}}}}},
        {"kubelet": {"kubelet": {"effective": {"logging": {"value": deep_a}}}}})
    html = re.sub(r"<[^>]+>", "", report_html_page.to_html(done))
    rendered = {"markdown": report_document.to_markdown(done), "html": html.replace("&#x27;", "'"),
                "table": "\n".join(report_console.table_lines(done, 200))}
    for name, text in rendered.items():
        assert "{'" not in text and "': '" not in text, (name, text[text.find("{'") - 200:text.find("{'") + 200])
    suggestion = "evictionHard: {imagefs.available: 15%, memory.available: 500Mi, nodefs.available: 10%}"
    extra = "kubelet_config_extra_args: {evictionSoft: {imagefs.available: 15%, memory.available: 500Mi, " \
            "nodefs.available: 10%}}"
    for name in ("markdown", "html"):
        assert suggestion in rendered[name] and extra in rendered[name], name
    assert yaml.safe_load(suggestion) == {"evictionHard": KUBESPRAY}
    assert yaml.safe_load(extra) == {"kubelet_config_extra_args": {"evictionSoft": KUBESPRAY}}
    changed = "kubelet logging.options.json.split {bufferSize: \"0\", stream: stderr} -> {bufferSize: \"0\", " \
              "stream: stdout}"
    assert changed in " ".join(rendered["table"].split()), rendered["table"]
    assert yaml.safe_load(changed.split(" -> ")[1]) == deep_a["options"]["json"]["split"]


@pytest.mark.parametrize("value", [
    KUBESPRAY, {"a": [1, "1", "1e3", "0x1f", "yes", "1:30", "2026-11-27", None, True, "x y", "a: b", "", "{x}",
                      u"\u00e9t\u00e9", "a,b", "-x", ".5", "1_000", "NaN", "~", "x #y", "10Gi", "it's"]},
    {"n": {}, "y": [], "deep": {"k": {"k": {"k": "v"}}}}, 3.5, "nodefs.inodesFree"])
def test_yaml_flow_reads_back_as_the_value(value):
    assert yaml.safe_load(text_yaml_flow(value)) == value
    assert "\n" not in text_yaml_flow(value)
