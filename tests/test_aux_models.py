"""Acceptance of the auxiliary models (``aux_models:``, :mod:`stackrl.aux_models`): a second Transformers model, an
OpenAI-compatible server (a loopback server, never the network) and a rule, asked by name through ``generate``,
``score`` and a judge's ``judge_model``.

The built-in ``stackrl/arith-skills`` judges arithmetic solutions ("Verdict: correct" or "wrong"), so the same
weights as the policy and as an auxiliary model must give the same judgements and log-probs.
"""

from __future__ import annotations

import json
import random
import threading
import time

import pytest
import torch
from werkzeug import Response

from stackrl import ConfigError, RewardContext, Rollout, StackrlError
from stackrl.aux_models import aux_models_of
from stackrl.aux_rules import register_rule
from stackrl.blocks.judges import Judge, JudgeSettings, Scale
from stackrl.tasks.arithmetic import make_dataset
from stackrl.tasks.roles import JUDGE_TEMPLATE, judge_reply, slip
from stackrl.testing.tiny import build_tiny_model, tiny_config

_ROWS = make_dataset(split="test", size=4, seed=0)
QUESTIONS = list(_ROWS["question"])
# Two solutions as the task writes them, two with one slipped step: the built-in judge tells them apart.
SOLVED = [s if i % 2 == 0 else slip(s, random.Random(i)) for i, s in enumerate(_ROWS["solution"])]
VERDICTS = [1.0, 0.0, 1.0, 0.0]
JUDGE = dict(judge_template=JUDGE_TEMPLATE, scale=Scale.correct_wrong, verdict_prefix="Verdict:", max_new_tokens=64)
CHAT_PATH = "/v1/chat/completions"


def rule_judge(prompts: list) -> list:
    """A perfect rule critic of the built-in task: the judge reply the task's own rule writes."""
    return [judge_reply(p.split("\n", 1)[1].rsplit("\n", 2)[0]) for p in prompts]


def lenient_judge(prompts: list) -> list:
    """A rule critic for any text: a solution that states an answer is correct."""
    return ["Verdict: " + ("correct" if "The answer is" in p else "wrong") for p in prompts]


register_rule("arith_judge", rule_judge)
register_rule("lenient_judge", lenient_judge)


def chat_reply(text) -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}


@pytest.fixture(scope="module")
def loopback():
    """A loopback HTTP server answering each request in its own thread, as a real server answers requests in
    flight together."""
    from pytest_httpserver import HTTPServer

    server = HTTPServer(threaded=True)
    server.start()
    yield server
    server.clear()
    server.stop()


@pytest.fixture
def httpserver(loopback):
    """The loopback server, its handlers and its log cleared after each test."""
    yield loopback
    loopback.clear()


@pytest.fixture(scope="module")
def server_url(loopback):
    return loopback.url_for("/v1")


@pytest.fixture(scope="module")
def trainer(tmp_path_factory, server_url):
    """The built-in judge as the policy and, under the same weights, as aux model ``twin``; a loopback server as
    ``critic`` (quick limits), the rule critic as ``checker``."""
    from stackrl.run import build_trainer

    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("aux")
    config = tiny_config(
        "stackrl/arith-skills", ["digit_reward"], tmp_dir=tmp, output_dir=str(tmp / "run"),
        aux_models={
            "twin": {"backend": "hf", "name_or_path": "stackrl/arith-skills"},
            "critic": {"backend": "openai", "base_url": server_url, "model": "judge-1", "timeout_s": 0.5,
                       "retries": 1, "backoff_s": 0.0, "api_key_env": "AUX_TEST_KEY"},
            "strict": {"backend": "openai", "base_url": server_url, "model": "judge-1", "timeout_s": 0.5,
                       "retries": 0, "on_failure": "error"},
            "checker": {"backend": "rule", "rule": "arith_judge"},
        },
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUX_TEST_KEY", "sk-test")
        return build_trainer(config)


def judge_with(trainer, judge_model: str, step: int = 0) -> list:
    """The judgements of :data:`SOLVED` by ``judge_model`` in a reward-stage context at ``step``."""
    trainer.state.global_step = step
    n = len(SOLVED)
    rollout = Rollout(list(QUESTIONS), list(SOLVED), [[0]] * n, [[0]] * n, {}, group_size=n)
    ctx = RewardContext(step=step, tokenizer=trainer.processing_class, policy=trainer._shared_policy,
                        _log=lambda *_: None, _plugin="sirlc", rollout=rollout)
    return Judge(JudgeSettings(**JUDGE, judge_model=judge_model), "sirlc").judgements(
        ctx, Judge(JudgeSettings(**JUDGE), "sirlc").prompts(rollout))


def test_an_hf_aux_model_judges_and_scores_as_the_same_weights_as_the_policy(trainer):
    as_policy, as_aux = judge_with(trainer, "policy"), judge_with(trainer, "twin")
    assert as_aux == as_policy
    assert None not in as_aux and 0.0 in as_aux and 1.0 in as_aux  # the built-in judge reads them all
    policy = trainer._shared_policy
    continuations = [trainer.processing_class(s, add_special_tokens=False)["input_ids"] for s in SOLVED]
    mine, twin = policy.score(QUESTIONS, continuations), policy.score(QUESTIONS, continuations, model="twin")
    assert torch.equal(mine.mask, twin.mask)
    torch.testing.assert_close(twin.logprobs, mine.logprobs, atol=1e-5, rtol=1e-5)
    assert mine.logprobs.abs().sum() > 0
    head = aux_models_of(trainer).models["twin"].model.get_output_embeddings().weight
    with torch.no_grad():
        head.mul_(2.0)  # the twin's own weights, not the policy's, are what it scores with
    try:
        changed = policy.score(QUESTIONS, continuations, model="twin").logprobs
    finally:
        with torch.no_grad():
            head.div_(2.0)
    assert not torch.allclose(changed, mine.logprobs, atol=1e-3)
    from stackrl.policy import PolicyAccess

    with pytest.raises(StackrlError, match="aux model 'twin' is frozen; grad=True needs model='policy'"):
        PolicyAccess(trainer, sharded=False, model=trainer.model).score(QUESTIONS, continuations, model="twin", grad=True)


def test_token_signals_take_an_aux_teacher_by_name(trainer):
    from stackrl import AdvantageContext
    from stackrl.blocks.tokensignals import REFERENCE, TokenSignals

    encode = lambda text: trainer.processing_class(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    n = len(SOLVED)
    rollout = Rollout(QUESTIONS, SOLVED, [encode(q) for q in QUESTIONS], [encode(c) for c in SOLVED],
                      {"solution": list(_ROWS["solution"]), "answer": list(_ROWS["answer"])}, group_size=n)
    signals = TokenSignals.of(trainer._context(AdvantageContext, rollout=rollout, total_reward=torch.zeros(n)))
    twin = signals.gap(REFERENCE, model="twin")
    torch.testing.assert_close(twin, signals.gap(REFERENCE), atol=1e-5, rtol=1e-5)
    assert twin.abs().sum() > 0  # the reference solution before the question changes what the judge expects


def test_a_rule_judges_through_the_judge_interface(trainer):
    assert judge_with(trainer, "checker") == VERDICTS
    with pytest.raises(StackrlError, match="aux model 'checker' \\(backend rule\\) gives no log-probs"):
        trainer._shared_policy.score(QUESTIONS[:1], [[1, 2]], model="checker")


def test_a_server_gives_the_same_parsed_verdicts_once_per_distinct_request_per_step(trainer, httpserver):
    def reply(request):
        body = json.loads(request.data)
        assert request.headers["Authorization"] == "Bearer sk-test"
        assert body["model"] == "judge-1" and body["temperature"] == 0.0 and body["max_tokens"] == 64
        return Response(json.dumps(chat_reply(rule_judge([body["messages"][0]["content"]])[0])),
                        content_type="application/json")

    httpserver.expect_request(CHAT_PATH, method="POST").respond_with_handler(reply)
    figures = aux_models_of(trainer)
    before = figures.totals["critic"].calls, figures.totals["critic"].cache_hits
    assert judge_with(trainer, "critic", step=7) == judge_with(trainer, "checker", step=7) == VERDICTS
    assert judge_with(trainer, "critic", step=7) == VERDICTS  # the same step: all cached
    assert len(httpserver.log) == 4
    judge_with(trainer, "critic", step=8)  # a new step asks again
    assert len(httpserver.log) == 8
    total = figures.totals["critic"]
    assert (total.calls - before[0], total.cache_hits - before[1]) == (8, 4)


@pytest.mark.parametrize("kind", ["not json", "no choices", "content not text", "server error", "too slow"])
def test_malformed_failing_and_slow_replies_are_none_counted_never_a_hang(trainer, httpserver, kind):
    answered = threading.Event()

    def reply(request):
        if kind == "too slow":
            answered.wait(1.0)  # past timeout_s 0.5, on every try (released once the judge has given up)
        payload = {"not json": "Verdict: correct", "no choices": json.dumps({"object": "error"}),
                   "content not text": json.dumps(chat_reply(None))}.get(kind, json.dumps(chat_reply("Verdict: correct")))
        return Response(payload, status=500 if kind == "server error" else 200, content_type="application/json")

    httpserver.expect_request(CHAT_PATH).respond_with_handler(reply)
    figures = aux_models_of(trainer).totals["critic"]
    failures = figures.failures
    start = time.perf_counter()
    assert judge_with(trainer, "critic", step=100 + len(kind)) == [None] * 4
    seconds = time.perf_counter() - start
    answered.set()
    assert figures.failures - failures == 4
    if kind == "too slow":
        assert 1.0 <= seconds < 3  # two tries of 0.5 s, the four requests in flight together
    else:  # a server error is tried again (retries: 1), a malformed reply is not
        assert len(httpserver.log) == (8 if kind == "server error" else 4)


def test_no_more_requests_are_in_flight_than_the_concurrency_allows(httpserver):
    from stackrl.aux_models import AuxModels, ServerModel
    from stackrl.config import AuxModelSection

    turn, flying, most, seen = threading.Condition(), [0], [0], []

    def reply(request):
        with turn:
            flying[0] += 1
            most[0] = max(most[0], flying[0])
            seen.append(request.data)
            turn.notify_all()
            turn.wait_for(lambda: flying[0] >= 3, timeout=0.3)  # held long enough for any third to come in
            flying[0] -= 1
        return Response(json.dumps(chat_reply("yes")), content_type="application/json")

    httpserver.expect_request(CHAT_PATH).respond_with_handler(reply)
    section = AuxModelSection(backend="openai", base_url=httpserver.url_for("/v1"), model="m", concurrency=2)
    models = AuxModels({"critic": ServerModel(section, "aux_models.critic")})
    replies = models.generate("critic", [f"question {i}" for i in range(6)], {}, step=0, shared=False)
    assert [r.text for r in replies] == ["yes"] * 6
    assert most[0] == 2 and len(seen) == 6


def test_the_completions_api_takes_text_and_the_chat_api_messages_as_they_are(httpserver):
    from stackrl.aux_models import AuxModels, ServerModel
    from stackrl.config import AuxModelSection

    bodies = []

    def reply(request):
        bodies.append(json.loads(request.data))
        text = "yes" if request.path.endswith("/completions") and "prompt" in bodies[-1] else "no"
        payload = {"choices": [{"text": text}]} if "prompt" in bodies[-1] else chat_reply(text)
        return Response(json.dumps(payload), content_type="application/json")

    httpserver.expect_request("/v1/completions").respond_with_handler(reply)
    httpserver.expect_request(CHAT_PATH).respond_with_handler(reply)
    url = httpserver.url_for("/v1")
    plain = ServerModel(AuxModelSection(backend="openai", base_url=url, model="m", api="completions"), "k")
    chat = ServerModel(AuxModelSection(backend="openai", base_url=url, model="m"), "k")
    models = AuxModels({"plain": plain, "chat": chat})
    messages = [{"role": "system", "content": "Judge."}, {"role": "user", "content": "2 + 2 = 4?"}]
    assert models.generate("plain", ["2 + 2 = 4?"], {"max_new_tokens": 3}, step=0, shared=False)[0].text == "yes"
    assert models.generate("chat", [messages], {}, step=0, shared=False)[0].text == "no"
    assert bodies[0] == {"model": "m", "n": 1, "max_tokens": 3, "prompt": "2 + 2 = 4?"}
    assert bodies[1]["messages"] == messages
    with pytest.raises(StackrlError, match="api completions takes text prompts"):
        models.generate("plain", [messages], {}, step=0, shared=False)


def test_a_rule_that_returns_the_wrong_count_is_named():
    from stackrl.aux_models import RuleModel
    from stackrl.config import AuxModelSection

    register_rule("one_reply", lambda prompts: ["yes"])
    rule = RuleModel(AuxModelSection(backend="rule", rule="one_reply"), "aux_models.short")
    with pytest.raises(StackrlError, match="aux_models.short: rule 'one_reply' must return one text .* 1 values for 2"):
        rule.replies(["a", "b"], {})


def test_a_failing_server_with_on_failure_error_stops_with_a_clear_error(trainer, httpserver):
    httpserver.expect_request(CHAT_PATH).respond_with_data("down", status=503)
    with pytest.raises(StackrlError, match=r"aux_models\.strict: 4 of 4 requests to .* failed after 1 tries .*HTTP 503"):
        judge_with(trainer, "strict", step=200)


def test_a_second_tokenizer_generates_and_judges_but_never_scores(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from stackrl.run import build_trainer

    other, stranger = tmp_path / "other", AutoTokenizer.from_pretrained(tiny_model_dir)
    stranger.add_tokens(["<step>"])  # one more token: a tokenizer that is no longer the policy's
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.resize_token_embeddings(len(stranger))
    model.save_pretrained(other)
    stranger.save_pretrained(other)
    torch.set_num_threads(1)
    trainer = build_trainer(tiny_config(tiny_model_dir, ["digit_reward"], tmp_dir=tmp_path, output_dir=str(tmp_path / "r"),
                                        aux_models={"stranger": {"name_or_path": str(other)}}))
    policy = trainer._shared_policy
    generated = policy.generate(QUESTIONS[:2], model="stranger", max_new_tokens=3, do_sample=False)
    assert [g.prompt_ids for g in generated] == stranger(text=QUESTIONS[:2])["input_ids"]
    assert all(len(g.completion_ids) <= 3 and not g.failed for g in generated)
    with pytest.raises(StackrlError, match="'stranger' has another tokenizer than the policy"):
        policy.score(QUESTIONS[:1], [[1, 2]], model="stranger")
    with pytest.raises(StackrlError, match="'stranger' names a model already"):
        policy.update_snapshot("stranger")


@pytest.fixture(scope="module")
def model_64(tmp_path_factory):
    """bitsandbytes' CPU 4-bit kernels need layers whose input width is a multiple of 64 (as in test_quantized)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny-64"), hidden_size=64)


def test_a_4bit_aux_model_generates_and_scores_on_cpu(tmp_path, model_64):
    import bitsandbytes as bnb

    from stackrl.run import build_trainer

    torch.set_num_threads(1)
    trainer = build_trainer(tiny_config(
        model_64, ["digit_reward"], tmp_dir=tmp_path, output_dir=str(tmp_path / "r"),
        aux_models={"small": {"name_or_path": str(model_64), "quantization": 4}},
    ))
    aux = aux_models_of(trainer).models["small"]
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in aux.model.modules())
    assert aux.footprint < sum(p.numel() * 4 for p in trainer.model.parameters())
    policy = trainer._shared_policy
    continuation = trainer.processing_class(SOLVED[0], add_special_tokens=False)["input_ids"]
    quantized, full = policy.score(QUESTIONS[:1], [continuation], model="small"), policy.score(QUESTIONS[:1], [continuation])
    assert torch.isfinite(quantized.logprobs).all()
    torch.testing.assert_close(quantized.logprobs, full.logprobs, atol=0.5, rtol=0.1)  # 4-bit: close, not equal
    assert not torch.equal(quantized.logprobs, full.logprobs)
    assert len(policy.generate(QUESTIONS[:1], model="small", max_new_tokens=2)) == 1


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"policy": {"name_or_path": "x"}}, "aux_models.policy: 'policy' names the run's own model already"),
        ({"critic": {"backend": "gpt"}}, "aux_models.critic.backend must be hf, openai or rule, not 'gpt'"),
        ({"critic": {"backend": "openai", "model": "m"}}, "aux_models.critic.base_url: backend openai needs it"),
        ({"critic": {"backend": "openai", "base_url": "localhost:1", "model": "m"}},
         "aux_models.critic.base_url must start with http:// or https://"),
        ({"critic": {"name_or_path": "x", "timeout_s": 3}}, "aux_models.critic.timeout_s is a setting of backend openai"),
        ({"critic": {"backend": "rule", "rule": "nobody"}}, "aux_models.critic.rule: no rule 'nobody' is registered"),
        ({"critic": {"name_or_path": "x", "quantization": 4, "offload": True}}, "aux_models.critic.offload"),
        ({"critic": {"backend": "openai", "base_url": "http://h", "model": "m", "on_failure": "skip"}},
         "aux_models.critic.on_failure must be none or error"),
        ({"critic": {"backend": "openai", "base_url": "http://h", "model": "m", "api_key": "sk-1"}},
         "unknown key 'aux_models.critic.api_key'. Did you mean 'api_key_env'"),
    ],
)
def test_aux_model_settings_that_cannot_work_are_refused_naming_the_key(tiny_model_dir, tmp_path, section, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(").replace("'", "'")):
        tiny_config(tiny_model_dir, tmp_dir=tmp_path, aux_models=section)


def test_validation_finds_a_missing_aux_model_folder_before_anything_loads(tiny_model_dir, tmp_path):
    from stackrl.run import validate

    config = tiny_config(tiny_model_dir, tmp_dir=tmp_path, output_dir=str(tmp_path / "run"),
                         aux_models={"twin": {"name_or_path": str(tmp_path / "absent")}})
    with pytest.raises(ConfigError, match="aux_models.twin.name_or_path: no model folder at"):
        validate(config)


def test_a_missing_api_key_variable_is_named(tiny_model_dir, tmp_path, monkeypatch):
    from stackrl.run import build_trainer

    monkeypatch.delenv("AUX_TEST_MISSING", raising=False)
    config = tiny_config(tiny_model_dir, tmp_dir=tmp_path, aux_models={"critic": {
        "backend": "openai", "base_url": "http://127.0.0.1:9", "model": "m", "api_key_env": "AUX_TEST_MISSING"}})
    with pytest.raises(ConfigError, match="aux_models.critic.api_key_env: the environment variable AUX_TEST_MISSING"):
        build_trainer(config)


def test_two_processes_get_the_same_judgements_from_one_call_per_request(tiny_model_dir, tmp_path, worker, httpserver):
    """Replies alternate with each request the server gets: had each process asked for itself, the two would
    differ and the server would count twice the distinct requests."""
    served = []

    def reply(request):
        served.append(json.loads(request.data)["messages"][0]["content"])
        return Response(json.dumps(chat_reply("Verdict: " + ("correct" if len(served) % 2 else "wrong"))),
                        content_type="application/json")

    httpserver.expect_request(CHAT_PATH).respond_with_handler(reply)
    run = {"name": "judged", "plugins": ["selfjudge"], "sections": {
        "output_dir": str(tmp_path / "run"),
        "trainer": {"per_device_train_batch_size": 4, "num_generations": 4, "max_steps": 2},
        "selfjudge": {"judge_model": "critic", "max_new_tokens": 4},
        "aux_models": {"critic": {"backend": "openai", "base_url": httpserver.url_for("/v1"), "model": "m"}},
    }}
    worker.launch(tiny_model_dir, [run], tmp_path)
    first, second = worker.reports(tmp_path, "judged")
    assert first["plugin_rewards"] == second["plugin_rewards"]
    judged = [r for call in first["plugin_rewards"] for r in call["result"]]
    assert len(judged) == 16 and set(judged) == {0.0, 1.0}
    assert 2 <= len(served) <= 16  # at most one request per completion judged, from one process


def test_a_run_logs_each_aux_models_figures_and_reports_its_memory(tiny_model_dir, tmp_path):
    from stackrl.run import train

    torch.set_num_threads(1)
    config = tiny_config(
        tiny_model_dir, ["selfjudge"], tmp_dir=tmp_path, output_dir=str(tmp_path / "run"),
        eval={"before_and_after": False}, selfjudge={"judge_model": "checker", "max_new_tokens": 4},
        aux_models={"checker": {"backend": "rule", "rule": "lenient_judge"},
                    "twin": {"name_or_path": str(tiny_model_dir)}},
    )
    result = train(config)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if "aux/checker/calls" in line]
    assert len(steps) == 2  # every step's line: its 4 completions judged, each distinct one asked once
    for line in steps:
        assert line["aux/checker/calls"] + line["aux/checker/cache_hits"] == 4
        assert line["aux/checker/failures"] == 0 and line["aux/twin/calls"] == 0
    checker, twin = result["aux_models"]
    assert checker.startswith("checker (rule): ") and "0 failures" in checker
    assert twin.startswith("twin (hf, ") and "MiB of weights): 0 calls" in twin


ERRING = """
import sys
from pathlib import Path

from accelerate import PartialState

from stackrl.aux_models import AuxModels, ServerModel
from stackrl.config import AuxModelSection

state = PartialState(cpu=True)  # gloo across the CPU processes, as a run with use_cpu
section = AuxModelSection(backend="openai", base_url=sys.argv[1], model="m", retries=0, on_failure="error")
models = AuxModels({"critic": ServerModel(section, "aux_models.critic")})
try:
    models.generate("critic", ["a", "b"], {}, step=0, shared=True)
    outcome = "no error"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {exc}"
Path(sys.argv[2], f"rank{state.process_index}.txt").write_text(outcome)
state.destroy_process_group()
"""


def test_a_failure_on_the_main_process_stops_both_processes_never_a_hang(tmp_path, httpserver):
    import os
    import subprocess
    import sys

    httpserver.expect_request(CHAT_PATH).respond_with_data("down", status=503)
    script = tmp_path / "erring.py"
    script.write_text(ERRING)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "HF_HUB_OFFLINE": "1"}
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                    str(script), httpserver.url_for("/v1"), str(tmp_path)], env=env, check=True, timeout=120,
                   capture_output=True)
    outcomes = [(tmp_path / f"rank{rank}.txt").read_text() for rank in range(2)]
    assert outcomes[0] == outcomes[1]
    assert outcomes[0].startswith("StackrlError: aux_models.critic: 2 of 2 requests") and "HTTP 503" in outcomes[0]
    assert len(httpserver.log) == 2  # the main process alone asked
