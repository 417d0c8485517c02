"""SSRL's rules on hand-built completions: the format score, the answer and its match, the combined reward, the
information mask, and the hooks that apply them."""

from types import SimpleNamespace

import pytest

from stackrl import Samples
from stackrl.testing.conformance import PluginConformance
from stackrl.testing.fixtures import make_plugin
from stackrl.testing.scripted import CharTokenizer
from stackrl_ssrl.masking import information_mask, information_spans
from stackrl_ssrl.rules import combined, exact_match, final_answer, format_score, normalize


class TestConformance(PluginConformance):
    plugin_name = "ssrl"
    refused_settings = [({"template": "Question:"}, "must contain {prompt}"),
                        ({"outcome_weight": -0.1}, "must be non-negative, not -0.1"),
                        ({"format_weight": -1.0}, "must be non-negative, not -1.0"),
                        ({"outcome_weight": 0.0, "format_weight": 0.0}, "both 0"),
                        ({"max_turn": 0}, "must be at least 1, not 0"),
                        ({"upper_bound": 1}, r"must be at least max_turn \(2\), not 1"),
                        ({"match": "f1"}, "must be one of em, equivalent, not 'f1'")]


THINK, ANSWER = "<think>t</think>", "<answer>Paris</answer>"
SEARCH = "<search>capital of France</search><information>Paris is the capital.</information>"


@pytest.mark.parametrize("text, score", [
    (THINK + ANSWER, 0.5),                                        # one think of max_turn 2
    (THINK + SEARCH + THINK + ANSWER, 1.0),                       # a think for each search, plus one
    ("  \n" + THINK + SEARCH + THINK + ANSWER + "\n", 1.0),       # surrounding space is stripped
    (THINK + SEARCH + SEARCH + THINK + ANSWER, 2 / 3),            # two searches, two thinks: ratio 2/3
    (THINK + SEARCH + THINK + SEARCH + THINK + ANSWER, 1.0),      # three thinks: capped at 1
    (THINK + "<search>q</search>" + THINK + ANSWER, 0.0),         # a search without its information
    (THINK + "<information>i</information>" + ANSWER, 0.0),       # information without a search
    (SEARCH + THINK + ANSWER, 0.0),                               # does not start with <think>
    (THINK + ANSWER + " done", 0.0),                              # does not end with </answer>
    (THINK + "<b>x</b>" + ANSWER, 0.0),                           # a tag of another kind
    ("<think> </think>" + ANSWER, 0.0),                           # an empty block
    (THINK + "<answer>your answer</answer>", 0.0),                # the instructions' placeholder
    (THINK + "<search>two\nlines</search><information>i</information>" + THINK + ANSWER, 0.0),
    (THINK + "<answer>a</answer>" + THINK + ANSWER, 0.5 * 1.0),   # the middle may hold other tags: 2 thinks, 0 searches
    (THINK + "<answer>x", 0.0),                                   # fewer than four tags
])
def test_format_score_by_hand(text, score):
    assert format_score(text) == pytest.approx(score)


def test_more_thinks_than_the_upper_bound_score_zero():
    eight = THINK + (SEARCH + THINK) * 7 + ANSWER
    nine = THINK + (SEARCH + THINK) * 8 + ANSWER
    assert format_score(eight) == 1.0 and format_score(nine) == 0.0
    assert format_score(nine, upper_bound=9) == 1.0
    assert format_score(THINK + ANSWER, max_turn=4) == 0.25


def test_the_last_answer_block_is_read_across_lines():
    assert final_answer("<answer>a</answer> <answer>\nNew York\n</answer>") == "New York"
    assert final_answer("The answer is 4.") is None


def test_exact_match_normalises_like_squad_and_takes_any_reference():
    assert normalize("The  Eiffel-Tower!") == "eiffeltower"
    assert exact_match("the Eiffel Tower.", "Eiffel Tower") == 1.0
    assert exact_match("Eiffel", ["Paris", "eiffel"]) == 1.0
    assert exact_match("Eiffel Tower, Paris", "Eiffel Tower") == 0.0  # equality, not containment
    assert exact_match(None, "x") == 0.0


def test_the_reward_is_nine_tenths_outcome_and_one_tenth_format():
    assert combined(1.0, 0.5) == pytest.approx(0.95)
    assert combined(0.0, 1.0) == pytest.approx(0.1)
    assert combined(1.0, 0.0, outcome_weight=0.5, format_weight=0.5) == 0.5


def test_information_blocks_are_masked_tags_included_and_nothing_else():
    text = "<think>a</think><search>q</search><information>x\ny</information><think>b</think><answer>c</answer>"
    ids = [ord(c) for c in text] + [CharTokenizer.eos_token_id]
    mask = information_mask(CharTokenizer(), ids)
    start, end = text.index("<information>"), text.index("</information>") + len("</information>")
    assert mask == [1] * start + [0] * (end - start) + [1] * (len(ids) - end)
    # The authors' pattern finds blocks on one line only.
    assert information_mask(CharTokenizer(), ids, across_lines=False) == [1] * len(ids)
    assert information_spans("<information>a</information> <information>b</information>") == [(0, 28), (29, 57)]


def test_a_token_straddling_a_blocks_edge_is_masked(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = "<think>3 + 4</think>\n<search>3 + 4</search>\n<information>3 + 4 = 7</information>\n<answer>7</answer>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    mask = information_mask(tokenizer, ids)
    masked = tokenizer.decode([t for t, m in zip(ids, mask) if not m])
    kept = tokenizer.decode([t for t, m in zip(ids, mask) if m])
    assert "<information>3 + 4 = 7</information>" in masked
    assert "information" not in kept and "<answer>7</answer>" in kept and "<search>3 + 4</search>" in kept


class SampleStub:
    """The sample stage's context: ``generate`` writes the given texts, one character a token."""

    def __init__(self, texts):
        self.texts, self.training, self.tokenizer, self.logged = texts, True, CharTokenizer(), {}

    def generate(self, prompts):
        return [SimpleNamespace(completion_ids=[ord(c) for c in t] + [9], prompt_ids=[1]) for t in self.texts]

    def log(self, name, value):
        self.logged[name] = value


def test_the_rollout_is_the_policys_pass_with_its_information_masked():
    plugin = make_plugin("ssrl")
    texts = ["<think>a</think><search>q</search><information>i</information><think>b</think><answer>c</answer>",
             "<think>a</think><answer>c</answer>"]
    ctx = SampleStub(texts)
    samples = plugin.generate_rollout(["p", "p"], ctx)
    assert isinstance(samples, Samples)
    assert samples.completion_ids == [[ord(c) for c in t] + [9] for t in texts]
    block = len("<information>i</information>")
    assert samples.loss_mask[0] == [1] * 34 + [0] * block + [1] * (len(texts[0]) + 1 - 34 - block)
    assert samples.loss_mask[1] == [1] * (len(texts[1]) + 1)
    assert ctx.logged == {"masked_tokens": pytest.approx(block / (len(texts[0]) + len(texts[1]) + 2)),
                          "masked_rows": 0.5}
    assert make_plugin("ssrl", mask_information=False).generate_rollout(["p"], ctx) is None
    ctx.training = False
    assert plugin.generate_rollout(["p"], ctx) is None  # held-out evaluation samples plainly


class RewardStub:
    def __init__(self, texts, answers):
        self.rollout = SimpleNamespace(completions=texts, columns={"answer": answers})
        self.logged, self.acted_on = {}, None

    def log(self, name, value):
        self.logged[name] = value

    def acted(self, n, *, of, hint=None):
        self.acted_on = (n, of)


def test_the_reward_scores_answer_and_format_and_leaves_rows_without_a_reference():
    well = THINK + SEARCH + THINK + "<answer>{}</answer>"
    texts = [well.format("Paris"), "<answer>Paris</answer>", well.format("Lyon"), well.format("-3"),
             well.format("3"), well.format("x")]
    answers = ["paris", "Paris", "Paris", "-3", "-3", None]
    ctx = RewardStub(texts, answers)
    rewards = make_plugin("ssrl").reward(ctx)
    # "em" drops the minus sign: 3 matches -3 (the authors' normalisation); "equivalent" does not.
    assert rewards == pytest.approx([1.0, 0.9, 0.1, 1.0, 1.0, None])
    assert ctx.acted_on == (5, 6)
    assert ctx.logged == {"format": pytest.approx(5 / 6), "outcome": pytest.approx(4 / 5)}
    assert make_plugin("ssrl", match="equivalent").reward(RewardStub(texts, answers))[4] == pytest.approx(0.1)
    assert make_plugin("ssrl", outcome_weight=0.0).reward(RewardStub(texts, [None] * 6)) == pytest.approx(
        [0.1, 0.0, 0.1, 0.1, 0.1, 0.1])


def test_the_template_frames_text_and_chat_prompts():
    plugin = make_plugin("ssrl", template="Q: {prompt}\n")
    assert plugin.transform_prompts(["2 + 2?"], None) == ["Q: 2 + 2?\n"]
    chat = [[{"role": "system", "content": "s"}, {"role": "user", "content": "2 + 2?"}]]
    assert plugin.transform_prompts(chat, None) == [[{"role": "system", "content": "s"},
                                                    {"role": "user", "content": "Q: 2 + 2?\n"}]]
    assert chat[0][1]["content"] == "2 + 2?"
    assert make_plugin("ssrl", template="{prompt}").transform_prompts(["x"], None) is None
    assert "<information>" in make_plugin("ssrl").transform_prompts(["x"], None)[0]
