"""A suite file's `[judge]` and `[pricing]` tables: the judge that grades its replies and
rubrics, and what each model's replies cost.

The judge's gaps are filled from the `MOSAIC_JUDGE_*` variables, which may also name a judge
alone (`judge_from_environment`); a case that asks a judge none names is refused (`NO_JUDGE`).
A price is of a million tokens (`costs`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .costs import PRICE_MAX, Price
from .judge import BASE_URL_VARIABLE, MODEL_VARIABLE, JudgeConfig
from .key_lines import KeyPath
from .key_reader import KeyReader, is_int, is_number, is_text

VOTES_MAX = 15
# A model's name as a reply records it (the business file's limit on `model`).
MODEL_MAX = 200
_JUDGE_KEYS = frozenset({"base_url", "model", "api_key_env", "votes"})
_PRICE_KEYS = frozenset({"input", "output"})
_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]*")
_URL = re.compile(r"https?://[^\s/]+(/\S*)?")

# Told of a case that asks a judge when neither `[judge]` nor the variables name one.
NO_JUDGE = (
    f"this asks a judge, and none is configured: add a [judge] table, or set "
    f"{BASE_URL_VARIABLE} and {MODEL_VARIABLE}"
)


def judge_from_environment(environ: Mapping[str, str] = os.environ) -> JudgeConfig | None:
    """The judge the `MOSAIC_JUDGE_*` variables name alone, or None when they name none."""
    base_url = environ.get(BASE_URL_VARIABLE, "")
    model = environ.get(MODEL_VARIABLE, "")
    if not (base_url and model):
        return None
    return JudgeConfig(base_url=base_url, model=model)


class JudgeAndPricingReader(KeyReader):
    """Reads `[judge]` and `[pricing]`; a refusal names the key's line."""

    def judge(self, table: object) -> JudgeConfig | None:
        """The `[judge]` table, its gaps filled from the `MOSAIC_JUDGE_*` variables."""
        where: KeyPath = ("judge",)
        if table is None:
            if judge_from_environment(self.environ) is None:
                return None
            # The variables alone name the judge: checked as a table of nothing would be.
            table = {}
        if not isinstance(table, dict):
            raise self.refuse(where, "judge must be a table")
        self.only(table, _JUDGE_KEYS, where, "[judge]")
        base_url = table.get("base_url", self.environ.get(BASE_URL_VARIABLE, ""))
        if not isinstance(base_url, str) or not _URL.fullmatch(base_url):
            raise self.refuse(
                (*where, "base_url"),
                f"the judge needs base_url, an http:// or https:// URL (or {BASE_URL_VARIABLE})",
            )
        model = table.get("model", self.environ.get(MODEL_VARIABLE, ""))
        if not isinstance(model, str) or not model.strip():
            raise self.refuse(
                (*where, "model"), f"the judge needs model, a text (or {MODEL_VARIABLE})"
            )
        api_key_env = table.get("api_key_env")
        if api_key_env is not None:
            if not isinstance(api_key_env, str) or not _VARIABLE.fullmatch(api_key_env):
                raise self.refuse(
                    (*where, "api_key_env"),
                    "api_key_env is the NAME of the variable holding the key (A-Z, 0-9, _)",
                )
            if not self.environ.get(api_key_env):
                raise self.refuse(
                    (*where, "api_key_env"), f"api_key_env names {api_key_env}, which is not set"
                )
        votes = table.get("votes", 1)
        if not is_int(votes) or not (1 <= votes <= VOTES_MAX and votes % 2 == 1):
            raise self.refuse(
                (*where, "votes"), f"votes must be an odd number from 1 to {VOTES_MAX}"
            )
        return JudgeConfig(base_url, model, api_key_env, votes)

    def pricing(self, table: object) -> dict[str, Price]:
        """`[pricing.MODEL]`: for each model, by the name its replies record, the price of a
        million `input` and of a million `output` tokens."""
        where: KeyPath = ("pricing",)
        if table is None:
            return {}
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise self.refuse(
                where, "pricing must be a table per model: [pricing.MODEL] input = …, output = …"
            )
        prices = {}
        for model, price in table.items():
            at = (*where, model)
            if not is_text(model) or len(model) > MODEL_MAX:
                raise self.refuse(
                    at, f"a priced model's name must be 1 to {MODEL_MAX} characters, none a control"
                )
            self.only(price, _PRICE_KEYS, at, f"[pricing.{model}]")
            for key in sorted(_PRICE_KEYS):
                value = price.get(key)
                if not is_number(value) or not 0 <= value <= PRICE_MAX:
                    raise self.refuse(
                        (*at, key),
                        f"[pricing.{model}] needs {key}, the price of a million {key} tokens: a "
                        f"number from 0 to {PRICE_MAX:,.0f}",
                    )
            prices[model] = Price(float(price["input"]), float(price["output"]))
        return prices
