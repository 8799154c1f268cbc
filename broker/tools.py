"""The tools an assistant run may call (SPEC §7.2): broker verbs, offered to a model as OpenAI
function tools.

A tool is a name, a sentence for the model and a JSON Schema for its arguments. Which tools a
run is offered follows from its role (`offered_tools`): `create_task` to every role,
`send_message` to a role with someone on its `send_to` list (the schema's `to` lists exactly
those; an instance named there is consulted and its answer is the call's result, R23),
`ask_human` to a role with `cross_role` authority (R19). An instance's reply table may narrow
the set (`tools = [...]`). Offering is not authorising: each call runs through the
broker's own verb as the run (`broker.steps`), so R8, R9, R11, R15 and R19 decide there, once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from broker.access import lists_of
from broker.models import HUMAN, TESTER, Instance
from broker.policy import RoleLists

CREATE_TASK = "create_task"
SEND_MESSAGE = "send_message"
ASK_HUMAN = "ask_human"
TOOL_NAMES = (CREATE_TASK, SEND_MESSAGE, ASK_HUMAN)

# Rounds of tool calls in one turn unless the reply table says otherwise (`max_steps`).
DEFAULT_MAX_STEPS = 8
MAX_STEPS_LIMIT = 50
# A call's arguments and a step's result as stored and shown, in characters of JSON text.
ARGUMENTS_MAX = 4000
RESULT_MAX = 4000

# Codes of an `error` step: the call never reached the broker.
UNKNOWN_TOOL = "unknown-tool"
INVALID_ARGUMENTS = "invalid-arguments"


def _text(description: str, *, max_length: int | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": 1, "description": description}
    if max_length is not None:
        schema["maxLength"] = max_length
    return schema


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Tool:
    """One tool as a model sees it."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def definition(self) -> dict[str, Any]:
        """The OpenAI function tool (`tools` of a chat completions request)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def create_task_tool() -> Tool:
    return Tool(
        CREATE_TASK,
        "Create a task from the person's request in this conversation. Only a person's own "
        "request can be turned into a task.",
        _object(title=_text("What is to be done, in a few words.", max_length=200)),
    )


def send_message_tool(recipients: Sequence[str]) -> Tool:
    return Tool(
        SEND_MESSAGE,
        "Send a message to another member of the team. A colleague answers it, and the answer "
        "is this call's result; `human`, the person in charge, reads it later.",
        _object(
            to={"type": "string", "enum": list(recipients), "description": "Who receives it."},
            body=_text("The message."),
        ),
    )


def ask_human_tool() -> Tool:
    return Tool(
        ASK_HUMAN,
        "Ask the person in charge to decide something; it goes to their inbox.",
        _object(question=_text("The decision to make, as a question.")),
    )


@dataclass(frozen=True)
class Toolbox:
    """The tools one instance's runs are offered, and how many rounds of calls a turn may take
    (`max_steps`); past it the turn fails with a sentence."""

    tools: tuple[Tool, ...] = ()
    max_steps: int = DEFAULT_MAX_STEPS
    _by_name: dict[str, Tool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {tool.name: tool for tool in self.tools})

    def get(self, name: str) -> Tool | None:
        return self._by_name.get(name)

    def definitions(self) -> list[dict[str, Any]]:
        return [tool.definition() for tool in self.tools]

    def answering(self, sender: str) -> Toolbox:
        """The tools for a turn from `sender`. A turn from another instance is a consultation
        (R23), which may not consult again: its `send_message` reaches `human` alone, if the
        role may send there at all."""
        message = self.get(SEND_MESSAGE)
        if sender in (HUMAN, TESTER) or message is None:
            return self
        recipients = [to for to in message.parameters["properties"]["to"]["enum"] if to == HUMAN]
        kept = [
            send_message_tool(recipients) if tool is message else tool
            for tool in self.tools
            if tool is not message or recipients
        ]
        return Toolbox(tools=tuple(kept), max_steps=self.max_steps)


def offered_tools(lists: RoleLists, reply: Mapping[str, Any] | None = None) -> Toolbox:
    """What a run of a role with `lists` is offered, narrowed by the instance's reply table
    (`tools`, `max_steps`)."""
    reply = reply or {}
    allowed: list[Tool] = [create_task_tool()]
    if lists.send_to:
        allowed.append(send_message_tool(sorted(lists.send_to)))
    if HUMAN in lists.cross_role:
        allowed.append(ask_human_tool())
    wanted = reply.get("tools")
    if wanted is not None:
        allowed = [tool for tool in allowed if tool.name in wanted]
    return Toolbox(tools=tuple(allowed), max_steps=int(reply.get("max_steps", DEFAULT_MAX_STEPS)))


def read_toolbox(*, business_id: int, instance: str) -> Toolbox:
    """What the runs of `instance` are offered now: one query (its role and reply table)."""
    found = (
        Instance.objects.filter(business_id=business_id, name=instance)
        .select_related("role")
        .first()
    )
    if found is None:
        return Toolbox()
    return offered_tools(lists_of(found), found.reply)


class BadCall(Exception):
    """A call that never reaches the broker: `code` is `unknown-tool` or `invalid-arguments`,
    `detail` a sentence the model can act on."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def stored_arguments(text: str) -> object:
    """A call's arguments as a step keeps them: the JSON object the model sent, or (anything
    else) its text, clipped."""
    try:
        parsed = json.loads(text) if len(text) <= ARGUMENTS_MAX else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    return text[:ARGUMENTS_MAX]


def checked_arguments(toolbox: Toolbox, name: str, text: str) -> tuple[Tool, dict[str, Any]]:
    """The tool a call names and its arguments, checked against the tool's schema; else
    `BadCall`. An empty text is read as `{}`, as some servers send for a tool without any."""
    tool = toolbox.get(name)
    if tool is None:
        offered = ", ".join(t.name for t in toolbox.tools) or "none"
        raise BadCall(UNKNOWN_TOOL, f"There is no tool named {name!r} here (offered: {offered}).")
    if len(text) > ARGUMENTS_MAX:
        raise BadCall(INVALID_ARGUMENTS, f"The arguments exceed {ARGUMENTS_MAX} characters.")
    try:
        arguments = json.loads(text) if text.strip() else {}
    except ValueError as error:
        raise BadCall(INVALID_ARGUMENTS, f"The arguments are not JSON ({error}).") from None
    if not isinstance(arguments, dict):
        raise BadCall(INVALID_ARGUMENTS, "The arguments must be a JSON object.")
    problem = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(tool.parameters).iter_errors(arguments)
    )
    if problem is not None:
        where = ".".join(str(part) for part in problem.absolute_path) or "arguments"
        raise BadCall(INVALID_ARGUMENTS, f"{where}: {problem.message}")
    return tool, arguments


def bounded(result: dict[str, Any]) -> dict[str, Any]:
    """A result within RESULT_MAX characters of JSON: a longer one keeps its `error` and a
    clipped `detail`."""
    if len(json.dumps(result)) <= RESULT_MAX:
        return result
    return {key: str(value)[: RESULT_MAX // 2] for key, value in result.items()}
