"""Limits and cleaning of suite runs' records: what a conversation-test run may store.

One source for these limits (STYLE 15): the models' constraints, the broker's checks and the
tester listener's input fields (and so its OpenAPI schema) all read them from here. Every value
is checked as the broker receives it, whatever the transport; a value over a limit is refused
`invalid`, never cut, so what is stored is what the runner sent.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from broker import fields, refusals
from broker.refusals import Refusal

# A suite's or a case's name.
SUITE_NAME_MAX = 80
# An instance's name (`Instance.name`'s column).
INSTANCE_NAME_MAX = 100
# Suites one run covers.
SUITES_MAX = 100
# Repeats of one case (`runs`); also the most threads and attempts one case names.
RUNS_MAX = 500
# Cases one run holds.
RUN_CASES_MAX = 2000
# Failures one case lists, and the characters of each text in one (a turn sent, what was
# expected, what came: as long as a message body may be).
FAILURES_MAX = 500
FAILURE_TEXT_MAX = 32_000
# A failure's turn: an index into a conversation.
TURN_MAX = 10_000
# How deep a case's attempts' containers nest.
ATTEMPTS_DEPTH_MAX = 16
# What one case record may store: its failures and attempts together, as JSON written in ASCII
# (`record_size`). The conversation-test client fits its records within the same number
# (`tester.suites.reports.STORED_RECORD`), so it never sends what is refused here; with the
# record's other fields it stays inside the listener's default request limit (256 KiB).
CASE_RECORD_MAX = 200_000
# What one page of a run's read may carry, in the same measure: a page stops before a case
# that would pass it (though it always holds one case). The answer carries the attempts twice
# (`repeats` and `attempts`), so it stays about 1 MB however big the run.
RUN_PAGE_SIZE_MAX = 500_000
# The largest id or integer the databases store.
INTEGER_MAX = 2**63 - 1
# A run's case selection (the client's `-k` substring), and the instances one run selects.
KEYWORD_MAX = 200
INSTANCES_MAX = 100
# The significance level of a run's comparisons when its start names none.
DEFAULT_ALPHA = 0.05
# Why a run was halted, as its client (or the broker) says it.
END_REASON_MAX = 2000
# A case definition's hash: sha256, as 64 lowercase hexadecimal digits.
DEFINITION_HASH = re.compile(r"[0-9a-f]{64}")
# A case's turns and tokens counted in its cost, each at most this: a run's sums over its
# RUN_CASES_MAX cases (`suite_runs.with_counts`) still fit the 64 bits the databases add in.
COST_COUNT_MAX = INTEGER_MAX // RUN_CASES_MAX
# A case's known cost, in dollars, at most this: no case costs near it, and a run's sum stays
# a finite number.
COST_AMOUNT_MAX = 1e12
# The fields of a case's cost, as the client's `Spend.as_json` writes them.
COST_KEYS = (
    "turns",
    "prompt_tokens",
    "completion_tokens",
    "amount",
    "turns_without_usage",
    "turns_without_price",
)


@dataclass(frozen=True)
class CaseRecord:
    """A case's result as the runner reports it, cleaned; `change` is the broker's to compute."""

    suite: str
    case: str
    instance: str
    verdict: str
    passed_runs: int
    runs: int
    threads: list[int]
    failures: list[dict[str, Any]]
    attempts: list[dict[str, Any]]
    statistics: Statistics | None = None
    definition_hash: str = ""
    cost: CaseCost | None = None


@dataclass(frozen=True)
class CaseCost:
    """What a case's replies used and cost, as the client counted them (its `Spend`): the
    tokens and the amount of the turns whose usage (and price) is known, and how many turns had
    no usage or no price. `amount` is None when no turn was priced: unknown, never zero."""

    turns: int
    prompt_tokens: int
    completion_tokens: int
    amount: float | None
    turns_without_usage: int
    turns_without_price: int


@dataclass(frozen=True)
class Statistics:
    """A case's pass rate over its repeats, its 95% Wilson interval and pass^k, as the client
    computed them: checked to be coherent, never recomputed (the client holds the repeats)."""

    pass_rate: float
    interval: tuple[float, float]
    # None: fewer repeats ran than k (a halted case).
    pass_hat_k: float | None


def record_size(failures: object, attempts: object) -> int:
    """What a case record stores of its texts: its failures and its attempts, each as JSON
    written in ASCII (every other character as its `\\u` escape), in characters, which are also
    the bytes the client sends them in."""
    return len(json.dumps(failures)) + len(json.dumps(attempts))


def _invalid(detail: str) -> Refusal:
    return Refusal(refusals.INVALID, detail)


def clean_integer(value: object, *, what: str, low: int, high: int) -> int:
    """An integer (not a boolean) from `low` to `high`."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _invalid(f"The {what} must be an integer from {low} to {high}.")
    return value


def clean_run_id(value: object, *, what: str = "run") -> int:
    """A run's id as a caller names it: 1 to INTEGER_MAX."""
    return clean_integer(value, what=f"{what} id", low=1, high=INTEGER_MAX)


def clean_suites(value: object) -> list[str]:
    """The suites a run covers: 1 to SUITES_MAX names, each once, returned sorted (a run is
    compared with another covering the same list)."""
    if not isinstance(value, list) or not 1 <= len(value) <= SUITES_MAX:
        raise _invalid(f"The suites must be a list of 1 to {SUITES_MAX} names.")
    names = [fields.clean_name(name, what="suite name", limit=SUITE_NAME_MAX) for name in value]
    if len(set(names)) != len(names):
        raise _invalid("The suites must name each suite once.")
    return sorted(names)


def clean_instances(value: object) -> list[str]:
    """The instances a run's cases were planned on: at most INSTANCES_MAX names, each once
    ("" is the business's default instance), returned sorted (`"last"` compares lists)."""
    value = _listed(value)
    if not isinstance(value, list) or len(value) > INSTANCES_MAX:
        raise _invalid(f"The instances must be a list of at most {INSTANCES_MAX} names.")
    names = [clean_instance(name) for name in value]
    if len(set(names)) != len(names):
        raise _invalid("The instances must name each instance once.")
    return sorted(names)


def clean_keyword(value: object) -> str:
    """A run's case selection: None (every case, stored "") or the text cases' names were
    selected by, 1 to KEYWORD_MAX characters."""
    if value is None:
        return ""
    text = fields.clean_text(value, what="keyword")
    if not 1 <= len(text) <= KEYWORD_MAX:
        raise _invalid(f"The keyword must be null or 1 to {KEYWORD_MAX} characters.")
    return text


def _clean_number(value: object, *, what: str) -> float:
    """A JSON number (not a boolean), finite, as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _invalid(f"The {what} must be a number.")
    try:
        number = float(value)
    except OverflowError:
        # An integer past every float (JSON reads integers of any length).
        raise _invalid(f"The {what} must be finite.") from None
    if not math.isfinite(number):
        raise _invalid(f"The {what} must be finite.")
    return number


def clean_alpha(value: object) -> float:
    """A run's significance level: more than 0 and less than 1."""
    alpha = _clean_number(value, what="alpha")
    if not 0 < alpha < 1:
        raise _invalid("The alpha must be more than 0 and less than 1.")
    return alpha


def clean_end_reason(value: object) -> str:
    """Why a run was halted: 1 to END_REASON_MAX characters."""
    text = fields.clean_text(value, what="reason")
    if not 1 <= len(text) <= END_REASON_MAX or not text.strip():
        raise _invalid(f"The reason must be 1 to {END_REASON_MAX} characters, not blank.")
    return text


def clean_statistics(
    *, pass_rate: object, interval: object, pass_hat_k: object
) -> Statistics | None:
    """The pass rate and its interval together, or no statistics at all (None: a client
    before them): numbers in [0, 1], the interval a pair `[lo, hi]` with lo ≤ pass_rate ≤ hi;
    pass^k in [0, 1] beside them, or null (fewer repeats ran than k)."""
    if pass_rate is None and interval is None and pass_hat_k is None:
        return None
    if pass_rate is None or interval is None:
        raise _invalid("The pass_rate and interval go together, and pass_hat_k with them.")
    interval = _listed(interval)
    if not isinstance(interval, list) or len(interval) != 2:
        raise _invalid("The interval must be a list [low, high].")
    rate = _clean_number(pass_rate, what="pass_rate")
    low = _clean_number(interval[0], what="interval's low")
    high = _clean_number(interval[1], what="interval's high")
    if not 0 <= low <= rate <= high <= 1:
        raise _invalid("The interval must hold the pass_rate: 0 ≤ low ≤ pass_rate ≤ high ≤ 1.")
    all_k = None if pass_hat_k is None else _clean_number(pass_hat_k, what="pass_hat_k")
    if all_k is not None and not 0 <= all_k <= 1:
        raise _invalid("The pass_hat_k must be from 0 to 1.")
    return Statistics(pass_rate=rate, interval=(low, high), pass_hat_k=all_k)


def clean_cost(value: object) -> CaseCost | None:
    """None (a client before costs) or exactly the object of COST_KEYS: whole counts from 0 to
    COST_COUNT_MAX, the turns without usage and those without a price at most the turns
    together, and `amount` a number from 0 to COST_AMOUNT_MAX when some turn was priced, null
    when none was (so an unknown cost is never stored as a zero)."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != set(COST_KEYS):
        raise _invalid(f"The cost must be an object with exactly {', '.join(COST_KEYS)}.")
    counts = {
        key: clean_integer(value[key], what=f"cost's {key}", low=0, high=COST_COUNT_MAX)
        for key in COST_KEYS
        if key != "amount"
    }
    unknown = counts["turns_without_usage"] + counts["turns_without_price"]
    if unknown > counts["turns"]:
        raise _invalid("The cost's turns without usage or a price must be among its turns.")
    amount = value["amount"]
    if unknown == counts["turns"]:
        if amount is not None:
            raise _invalid("The cost's amount must be null when no turn was priced.")
        return CaseCost(amount=None, **counts)
    known = _clean_number(amount, what="cost's amount")
    if not 0 <= known <= COST_AMOUNT_MAX:
        raise _invalid(f"The cost's amount must be from 0 to {COST_AMOUNT_MAX:g}.")
    return CaseCost(amount=known, **counts)


def clean_definition_hash(value: object) -> str:
    """A case definition's sha256 as 64 lowercase hexadecimal digits, or "" (not sent)."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or not DEFINITION_HASH.fullmatch(value):
        raise _invalid("The definition_hash must be a sha256: 64 lowercase hexadecimal digits.")
    return value


def clean_case(
    *,
    suite: object,
    case: object,
    instance: object,
    verdict: object,
    passed_runs: object,
    runs: object,
    threads: object,
    failures: object,
    attempts: object,
    verdicts: list[str],
    pass_rate: object = None,
    interval: object = None,
    pass_hat_k: object = None,
    definition_hash: object = None,
    cost: object = None,
) -> CaseRecord:
    """A case's result, every field within its limits; `verdicts` are the known verdicts."""
    if not isinstance(verdict, str) or verdict not in verdicts:
        raise _invalid(f"The verdict must be one of {', '.join(verdicts)}.")
    repeats = clean_integer(runs, what="runs", low=1, high=RUNS_MAX)
    passed = clean_integer(passed_runs, what="passed_runs", low=0, high=repeats)
    kept_failures, kept_attempts = clean_failures(failures), clean_attempts(attempts)
    if record_size(kept_failures, kept_attempts) > CASE_RECORD_MAX:
        raise _invalid(
            f"The failures and attempts of a case must be at most {CASE_RECORD_MAX} characters "
            "together, as JSON written in ASCII."
        )
    return CaseRecord(
        suite=fields.clean_name(suite, what="suite name", limit=SUITE_NAME_MAX),
        case=fields.clean_name(case, what="case name", limit=SUITE_NAME_MAX),
        instance=clean_instance(instance),
        verdict=verdict,
        passed_runs=passed,
        runs=repeats,
        threads=clean_threads(threads),
        failures=kept_failures,
        attempts=kept_attempts,
        statistics=clean_statistics(pass_rate=pass_rate, interval=interval, pass_hat_k=pass_hat_k),
        definition_hash=clean_definition_hash(definition_hash),
        cost=clean_cost(cost),
    )


def clean_instance(value: object) -> str:
    """The instance a case's threads talked to; empty only for a case that reached none (no
    thread of it may then be named: each thread's instance must be this one)."""
    if value == "":
        return ""
    return fields.clean_name(value, what="instance name", limit=INSTANCE_NAME_MAX)


def _listed(value: object) -> object:
    """A tuple as the list JSON would give (Python callers' empty default is `()`)."""
    return list(value) if isinstance(value, tuple) else value


def clean_threads(value: object) -> list[int]:
    """The ids of a case's threads, at most RUNS_MAX (whose they are is the broker's check)."""
    value = _listed(value)
    if not isinstance(value, list) or len(value) > RUNS_MAX:
        raise _invalid(f"The threads must be a list of at most {RUNS_MAX} thread ids.")
    return [clean_run_id(thread, what="thread") for thread in value]


# A failure's keys, each with whether it may be null.
FAILURE_KEYS = {"repeat": False, "turn": True, "sent": True, "expected": False, "actual": False}


def clean_failures(value: object) -> list[dict[str, Any]]:
    """What failed: at most FAILURES_MAX objects, each exactly
    `{"repeat": int, "turn": int|null, "sent": str|null, "expected": str, "actual": str}`."""
    value = _listed(value)
    if not isinstance(value, list) or len(value) > FAILURES_MAX:
        raise _invalid(f"The failures must be a list of at most {FAILURES_MAX} objects.")
    return [_clean_failure(failure) for failure in value]


def _clean_failure(failure: object) -> dict[str, Any]:
    if not isinstance(failure, dict) or set(failure) != set(FAILURE_KEYS):
        raise _invalid(f"Each failure must be an object with exactly {', '.join(FAILURE_KEYS)}.")
    turn = failure["turn"]
    sent = failure["sent"]
    return {
        "repeat": clean_integer(failure["repeat"], what="failure's repeat", low=0, high=RUNS_MAX),
        "turn": None
        if turn is None
        else clean_integer(turn, what="failure's turn", low=0, high=TURN_MAX),
        "sent": None if sent is None else _clean_failure_text(sent, what="failure's sent"),
        "expected": _clean_failure_text(failure["expected"], what="failure's expected"),
        "actual": _clean_failure_text(failure["actual"], what="failure's actual"),
    }


def _clean_failure_text(value: object, *, what: str) -> str:
    text = fields.clean_text(value, what=what)
    if len(text) > FAILURE_TEXT_MAX:
        raise _invalid(f"The {what} must be at most {FAILURE_TEXT_MAX} characters.")
    return text


def clean_attempts(value: object) -> list[dict[str, Any]]:
    """The runner's detail of each repeat, stored as given: a list of at most RUNS_MAX objects
    whose contents are the runner's own. Bounded all the same, so every database stores them:
    JSON values only, text that UTF-8 and PostgreSQL carry (no lone surrogates, no NUL),
    finite numbers within 64 bits, containers at most ATTEMPTS_DEPTH_MAX deep (their size,
    with the failures', is `clean_case`'s CASE_RECORD_MAX)."""
    value = _listed(value)
    if not isinstance(value, list) or len(value) > RUNS_MAX:
        raise _invalid(f"The attempts must be a list of at most {RUNS_MAX} objects.")
    if not all(isinstance(attempt, dict) for attempt in value):
        raise _invalid("Each attempt must be an object.")
    _check_json(value)
    return value


def _check_json(value: object) -> None:
    """Refuse anything in `value` a database could not store as JSON (iterative: no depth of
    nesting can exhaust the stack)."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (dict, list)):
            if depth > ATTEMPTS_DEPTH_MAX:
                raise _invalid(f"The attempts must nest at most {ATTEMPTS_DEPTH_MAX} deep.")
            if isinstance(item, dict):
                for key in item:
                    fields.clean_text(key, what="attempt key")
                children = list(item.values())
            else:
                children = item
            pending.extend((child, depth + 1) for child in children)
        elif isinstance(item, str):
            fields.clean_text(item, what="attempt text")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _invalid("The attempts' numbers must be finite.")
        elif isinstance(item, int) and not isinstance(item, bool):
            if abs(item) > INTEGER_MAX:
                raise _invalid("The attempts' integers must fit in 64 bits.")
        elif item is not None and not isinstance(item, bool):
            raise _invalid("The attempts must hold JSON values only.")
