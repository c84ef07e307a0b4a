"""The OpenAI-compatible provider against the fake model server: JSON, streamed chunks, and every
way it fails (down, slow, an error status, a body that is no completion, a stream cut short)."""

from __future__ import annotations

import time

import pytest
from pydantic import SecretStr

from app.coach.llm import ChatProvider, ProviderFailed
from tests.coach.fake_llm import DEFAULT_ANSWER, TRICKLE_PIECES, FakeModel

MESSAGES = [{"role": "system", "content": "rules"}, {"role": "user", "content": "why?"}]


def provider(model: FakeModel, timeout_s: float = 5.0) -> ChatProvider:
    return ChatProvider(
        base_url=model.url, model="tutor-7b", api_key=SecretStr("sk-test"), timeout_s=timeout_s
    )


def test_a_json_completion_is_the_answer(fake_model: FakeModel) -> None:
    assert provider(fake_model).complete(MESSAGES) == DEFAULT_ANSWER
    sent = fake_model.requests[-1]
    assert sent["model"] == "tutor-7b"
    assert sent["stream"] is False
    assert sent["messages"] == MESSAGES
    assert fake_model.authorization[-1] == "Bearer sk-test"


def test_a_streamed_completion_arrives_in_pieces(fake_model: FakeModel) -> None:
    pieces = list(provider(fake_model).stream(MESSAGES))
    assert len(pieces) > 5
    assert "".join(pieces) == DEFAULT_ANSWER
    assert fake_model.requests[-1]["stream"] is True


def test_no_api_key_sends_no_authorization(fake_model: FakeModel) -> None:
    keyless = ChatProvider(base_url=fake_model.url, model="m", api_key=None, timeout_s=5)
    keyless.complete(MESSAGES)
    assert fake_model.authorization[-1] is None


@pytest.mark.parametrize("mode", ["error", "garbage"])
@pytest.mark.parametrize("streamed", [False, True])
def test_a_bad_answer_fails(fake_model: FakeModel, mode: str, streamed: bool) -> None:
    fake_model.mode = mode
    with pytest.raises(ProviderFailed):
        if streamed:
            list(provider(fake_model).stream(MESSAGES))
        else:
            provider(fake_model).complete(MESSAGES)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_slow_model_fails_at_the_time_limit(fake_model: FakeModel, streamed: bool) -> None:
    fake_model.mode = "slow"
    fake_model.delay_s = 3.0
    slow = provider(fake_model, timeout_s=0.5)
    with pytest.raises(ProviderFailed):
        if streamed:
            list(slow.stream(MESSAGES))
        else:
            slow.complete(MESSAGES)


@pytest.mark.parametrize("streamed", [False, True])
def test_the_time_limit_is_one_deadline_for_the_whole_answer_not_per_read(
    fake_model: FakeModel, streamed: bool
) -> None:
    fake_model.mode = "trickle"
    fake_model.delay_s = 0.3  # every read is quick; the whole answer takes several seconds
    trickling = provider(fake_model, timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(ProviderFailed, match="time limit"):
        if streamed:
            list(trickling.stream(MESSAGES))
        else:
            trickling.complete(MESSAGES)
    # Cut near the deadline, not when the last piece came (a generous bound under load).
    assert time.monotonic() - started < TRICKLE_PIECES * 0.3 * 0.6


def test_a_trickled_answer_within_the_deadline_is_the_answer(fake_model: FakeModel) -> None:
    fake_model.mode = "trickle"
    fake_model.delay_s = 0.01
    assert provider(fake_model, timeout_s=10.0).complete(MESSAGES) == DEFAULT_ANSWER


def test_the_api_key_is_a_secret(fake_model: FakeModel) -> None:
    keyed = provider(fake_model)
    assert "sk-test" not in repr(keyed) and "sk-test" not in str(keyed.api_key)
    keyed.complete(MESSAGES)
    assert fake_model.authorization[-1] == "Bearer sk-test"


def test_a_stream_cut_before_done_fails(fake_model: FakeModel) -> None:
    fake_model.mode = "cut"
    with pytest.raises(ProviderFailed, match="ended before"):
        list(provider(fake_model).stream(MESSAGES))


def test_an_empty_answer_fails(fake_model: FakeModel) -> None:
    fake_model.answer = "   "
    with pytest.raises(ProviderFailed, match="empty"):
        provider(fake_model).complete(MESSAGES)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_server_that_is_down_fails(streamed: bool) -> None:
    model = FakeModel().start()
    url = model.url
    model.stop()
    down = ChatProvider(base_url=url, model="m", api_key=None, timeout_s=2)
    with pytest.raises(ProviderFailed, match=r"reached|failed"):
        if streamed:
            list(down.stream(MESSAGES))
        else:
            down.complete(MESSAGES)
