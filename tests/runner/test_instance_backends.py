"""Each instance's own reply settings (the business file's `[instances.NAME.reply]`), and the
model-server check a runner makes at its start (SPEC §7.1)."""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ImproperlyConfigured

from broker import actions
from broker.actors import Actor
from broker.models import Instance, Message
from runner.backends import backend_for, no_drafts
from runner.backends.base import EndpointRefused
from runner.backends.chat_completions import ChatCompletionsBackend
from runner.backends.offline import OfflineBackend
from runner.service import Runner
from tests.broker import factories
from tests.support.turns import Tools, make_turn
from tests.support.waits import wait_for


def test_instance_settings_override_the_process_settings_key_by_key(settings, monkeypatch) -> None:
    settings.MOSAIC_ASSISTANT_BACKEND = "offline"
    settings.MOSAIC_ASSISTANT_MAX_TOKENS = 900
    monkeypatch.setenv("TEAM_MODEL_KEY", "sk-team")
    backend = backend_for(
        {
            "backend": "openai",
            "base_url": "http://127.0.0.1:9/v1",
            "model": "smollm2",
            "api_key_env": "TEAM_MODEL_KEY",
            "system_prompt": "You are terse.",
            "context_tokens": 2048,
        },
        instance="assistant",
    )
    assert isinstance(backend, ChatCompletionsBackend)
    assert (backend.model, backend.api_key, backend.system_prompt) == (
        "smollm2",
        "sk-team",
        "You are terse.",
    )
    assert (backend.max_tokens, backend.context_tokens) == (900, 2048)
    assert isinstance(backend_for(None), OfflineBackend)


def test_instance_whose_key_variable_is_unset_fails_closed(monkeypatch) -> None:
    monkeypatch.delenv("TEAM_MODEL_KEY", raising=False)
    reply = {"backend": "openai", "base_url": "http://x/v1", "model": "m"}
    with pytest.raises(ImproperlyConfigured, match="TEAM_MODEL_KEY is not set"):
        backend_for({**reply, "api_key_env": "TEAM_MODEL_KEY"}, instance="assistant")


def test_instance_system_prompt_and_context_reach_the_model(fake_model) -> None:
    """The instance's system prompt replaces the default; the tester line still comes first."""
    backend = ChatCompletionsBackend(
        base_url=fake_model.url, model="m", system_prompt="You are terse.", max_tokens=64
    )
    backend.reply(
        make_turn("hi", tester=True), tools=Tools(None), cancel=threading.Event(), draft=no_drafts
    )
    (request,) = fake_model.requests
    system = request["messages"][0]["content"].split("\n")
    assert system[0].startswith("This message is from a tester")
    assert system[1] == "You are terse."
    assert request["max_tokens"] == 64


def test_check_refuses_a_model_the_server_does_not_serve(fake_model) -> None:
    fake_model.models = ["smollm2", "other"]
    ChatCompletionsBackend(base_url=fake_model.url, model="smollm2").check()
    with pytest.raises(EndpointRefused, match="does not serve the model 'gpt-9'"):
        ChatCompletionsBackend(base_url=fake_model.url, model="gpt-9").check()


def test_check_refuses_a_refused_key(fake_model) -> None:
    fake_model.models = []
    fake_model.models_status = 401
    with pytest.raises(EndpointRefused, match="refused the API key"):
        ChatCompletionsBackend(base_url=fake_model.url, model="m", api_key="bad").check()


def test_check_lets_an_unreachable_server_pass(fake_model) -> None:
    """Turns wait and retry until the server is there: only a refusal stops the start."""
    fake_model.models = None  # 404 on /models, like a server that lists nothing
    ChatCompletionsBackend(base_url=fake_model.url, model="m").check()
    ChatCompletionsBackend(base_url="http://127.0.0.1:9/v1", model="m", connect_timeout=1).check()


@pytest.mark.django_db(transaction=True)
def test_runner_with_an_unknown_instance_model_does_not_start(
    human: Actor, fake_model, short_lease
) -> None:
    fake_model.models = ["smollm2"]
    Instance.objects.filter(name="assistant").update(
        reply={"backend": "openai", "base_url": fake_model.url, "model": "gpt-9"}
    )
    runner = Runner(poll_interval=0.02)
    with pytest.raises(ImproperlyConfigured, match="does not serve the model 'gpt-9'"):
        runner.start()


@pytest.mark.django_db(transaction=True)
def test_runner_answers_each_instance_with_its_own_backend(
    human: Actor, fake_model, short_lease
) -> None:
    """An instance with reply settings is answered by its model; the process default (offline
    here) answers the others."""
    fake_model.models = ["smollm2"]
    factories_business = Instance.objects.get(name="assistant").business
    Instance.objects.filter(name="assistant").update(
        reply={"backend": "openai", "base_url": fake_model.url, "model": "smollm2"}
    )
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="hello").message
    runner = Runner(poll_interval=0.02, business_id=factories_business.pk)
    runner.start()
    try:
        reply = wait_for(
            lambda: Message.objects.filter(in_reply_to=turn, message_class="RESULT").first()
        )
    finally:
        assert runner.stop(timeout=10)
    assert (reply.body, reply.model) == ("model reply", "smollm2")
    assert fake_model.requests[0]["model"] == "smollm2"
    assert "per instance" in str(runner)
