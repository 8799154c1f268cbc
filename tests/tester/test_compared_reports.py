"""Diffs a reviewer reads, end to end: `mosaic-test --compare last --html --markdown` against a
real `manage.py serve` whose instance asks a scripted model, once as it was and once after a
change that breaks one case, fixes another and makes a third, hostile in name and reply, fail.

The HTML page draws the listener's comparison of the two stored test runs case by case,
regressions first, each regression's failing repeat beside the baseline's repeat, turn by turn;
both runs' replies come from their threads through the tester listener's comparison of each case,
archived threads included. The Markdown summary, read back as
a renderer reads it, counts verdicts and changes, names each regression with its p-value and
`k/N` before and after, tells the cost as unknown where it is, and gives the command that ran
it; the hostile case breaks no table and makes no link or image.
"""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Iterator
from contextlib import redirect_stdout
from html import escape
from typing import Any

import pytest

from tester.suites import cli
from tests.console.pages import unique
from tests.support.html_outline import outline
from tests.support.markdown_reading import markup_in, read
from tests.support.model_servers import FakeModel, serve_fake_model
from tests.support.served import Served, human_left_alone
from tests.support.suite_runs import add_model_instance, run_testassistant, write_suite

INSTANCE = "diffed"
HOSTILE_NAME = "p|q `t` ![i](http://198.51.100.7/i.png) <script>x</script>"
HOSTILE_REPLY = (
    "a | b | c `tick` ![pixel](http://198.51.100.7/p.png) [click](http://198.51.100.7/) "
    "<script>alert(1)</script>\n| x | y |\n\x1b[2K\r\x1b[32mPASS\x1b[0m"
)
CASE = """
[[cases]]
name = '{name}'
instance = "{instance}"
repeat = 4

[[cases.turns]]
send = "{send}"
expect = {{ contains = ["{wanted}"] }}
"""
# Each case: its name, what it sends, and what its reply must contain.
CASES = [
    ("capital", "capital of France?", "Paris"),
    ("weather", "weather today?", "Sunny"),
    (HOSTILE_NAME, "hostile, please", "safe"),
]


def suite_text(suite: str) -> str:
    cases = "".join(
        CASE.format(name=name, instance=INSTANCE, send=send, wanted=wanted)
        for name, send, wanted in CASES
    )
    return f'name = "{suite}"\nproject = "qa"\n{cases}'


class Script:
    """The model before the change, and after it (`changed`)."""

    def __init__(self) -> None:
        self.changed = False

    def __call__(self, body: dict[str, Any]) -> str:
        said = body["messages"][-1]["content"]
        if "capital" in said:
            return "Marseille." if self.changed else "Paris."
        if "weather" in said:
            return "Sunny." if self.changed else "Rain."
        return HOSTILE_REPLY if self.changed else "safe"


def mosaic_test(argv: list[str]) -> tuple[int, str]:
    """`mosaic-test` with `argv`, as its entry point runs it: its status and what it printed."""
    printed = io.StringIO()
    with redirect_stdout(printed), pytest.raises(SystemExit) as exited:
        cli.main(argv)
    return int(exited.value.code or 0), printed.getvalue()


@pytest.fixture(scope="module")
def compared(
    suite_server: Served, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Two test runs of the suite, the second after the change and compared with the first;
    the human's work left alone."""
    live, script, directory = suite_server, Script(), tmp_path_factory.mktemp("compared")
    suite = unique("diffs")
    path = write_suite(directory, suite_text(suite))
    html, markdown = directory / "report.html", directory / "reports" / "summary.md"
    argv = [str(path), "--url", live.url, "--compare", "last", "--html", str(html)]
    argv += ["--markdown", str(markdown)]
    with (
        serve_fake_model(FakeModel(script=script, streams=False)) as model,
        human_left_alone(live),
    ):
        add_model_instance(live.server, directory, INSTANCE, model.url)
        first = run_testassistant(path, "--url", live.url, "--json")
        assert first.status == 1, first.out + first.error
        script.changed = True
        status, out = mosaic_test(argv)
    assert status == 1, out
    runs = live.tester.get("/api/suite-runs?limit=2")["runs"]
    yield {
        "suite": suite,
        "argv": argv,
        # As written: a reply's carriage return stays one.
        "html": html.read_bytes().decode("utf-8"),
        "markdown": markdown.read_bytes().decode("utf-8"),
        "run": runs[0]["id"],
        "baseline": first.json_lines()[-1]["summary"]["run"],
        "stored_baseline": runs[0]["baseline"],
    }


def test_html_compares_the_runs_case_by_case_regressions_first(compared: dict[str, Any]) -> None:
    """The comparison's groups worst first; each regression's last failing repeat beside the
    baseline's last repeat (its thread archived, as a passed repeat's is), turn by turn; the
    fix's passing repeat beside the baseline's last failing one; the hostile reply as text."""
    suite, baseline = compared["suite"], compared["baseline"]
    assert compared["stored_baseline"] == baseline
    page = compared["html"]
    found = outline(page)
    assert found.groups == ["regressed", "fixed"]
    assert [(case.change, case.name) for case in found.cases] == [
        ("regressed", f"{suite} · capital"),
        ("regressed", f"{suite} · {HOSTILE_NAME}"),
        ("fixed", f"{suite} · weather"),
    ]
    capital, hostile, weather = found.cases
    assert capital.texts["before"][-2:] == ["capital of France?", "Paris."]
    assert capital.texts["now"][-2:] == ["capital of France?", "Marseille."]
    assert hostile.texts["before"][-1] == "safe"
    assert hostile.texts["now"][-1] == HOSTILE_REPLY
    assert weather.texts["before"][-1] == "Rain." and weather.texts["now"][-1] == "Sunny."
    assert f"run {baseline}, repeat 4: passed · " in page
    # Each case links to its own section below, found by the id its stored record was given.
    links = re.findall(r'<a href="#(case-\d+)"><span class="name">([^<]*)</span></a>', page)
    assert [name for _, name in links] == [escape(case.name) for case in found.cases]
    for anchor, name in links:
        assert re.search(
            f'<section class="case" id="{anchor}"><h2>[^\n]*{re.escape(name)}</h2>', page
        )
    assert "4/4 pass → 0/4 fail · p = 0.014" in page and "0/4 fail → 4/4 pass · p = 0.014" in page
    assert not {"script", "img"} & set(found.tags)


def test_markdown_summary_counts_regressions_and_gives_the_command(
    compared: dict[str, Any],
) -> None:
    """Read back: the counts, each regression with its `k/N` before and after and its p-value,
    the fix, the cost unknown for want of a price, what was compared, and the command as run;
    the hostile name keeps the table's five columns and makes no link, image or HTML."""
    suite, run, baseline = compared["suite"], compared["run"], compared["baseline"]
    document = read(compared["markdown"])
    verdicts, changes, regressed, fixed = document.tables
    assert verdicts == [["pass", "flaky", "fail", "error", "not run"], ["1", "0", "2", "0", "0"]]
    assert changes == [["regressed", "fixed", "changed", "new", "same"], ["2", "1", "0", "0", "0"]]
    assert [len(row) for row in regressed] == [5, 5, 5]
    assert [row[:4] for row in regressed[1:]] == [
        [f"{suite} · capital", "4/4", "0/4 fail", "0.014"],
        [f"{suite} · {HOSTILE_NAME}", "4/4", "0/4 fail", "0.014"],
    ]
    excerpt = regressed[2][4]
    assert excerpt.startswith("repeat 1, turn 1 “hostile, please”: expected the reply contains")
    assert "got “a | b | c `tick` ![pixel](http://198.51.100.7/p.png)" in excerpt
    assert fixed[1] == [f"{suite} · weather", "0/4", "4/4 pass", "0.014"]
    assert markup_in(document) == set()
    assert "\x1b" not in compared["markdown"] and "\r" not in compared["markdown"]
    # No bare address for GitHub to link, outside the command's code block.
    assert "://198.51.100.7" not in compared["markdown"].split("```sh")[0]
    assert f"Run {run}, compared with run {baseline} (--compare last) at alpha 0.05." in (
        document.paragraphs
    )
    assert (
        "Tokens and cost: tokens 132 in, 24 out · cost unknown (12 turns without a price)"
        in document.paragraphs
    )
    assert document.fences == [("sh", f"mosaic-test {shlex.join(compared['argv'])}\n")]
