"""The experience library: what a method keeps of the policy's earlier steps, and finds again later.

Methods that learn from old experience keep records of it: stale rollouts to replay with their behaviour log-probs
(ReMix, SPEAR), successes to imitate, skills, principles or documents distilled from trajectories and retrieved into
a later prompt (UCOB, Skill-SD, SEED, EvolveR, LANPO, OPD-Evolver, DARC). An :class:`ExperienceLibrary` holds such
:class:`Experience` records under unique keys, with an explicit capacity and eviction rule (the oldest record, or
the one of lowest utility), an optional limit per prompt, and lexical retrieval over one text field of the records
(ROUGE-L, the self-instruction block's measure; or BM25 with the optional ``bm25s`` package, ``pip install
'stackrl[bm25]'``).

Every decision (what is kept, evicted, retrieved) follows from the records and the order they were added, never
from a random draw, so the library stays identical on every process: sample, reward and advantage hooks see the
same whole rollout everywhere. Its state goes into checkpoints as a few plain lists and two flat tensors (a
weights-only load accepts it), and :meth:`ExperienceLibrary.state_dict` refuses a state larger than the settings'
``max_state_bytes``, before the trainer writes anything of the checkpoint.

Checkpoint size at capacity: about 4 bytes per stored token and per behaviour log-prob, the UTF-8 bytes of the
texts, and about 100 bytes per record besides (its key, step, rewards, tags, utility and lengths); so a full library
of 1024 rollouts of a 100-token prompt and a 400-token completion with their log-probs and text takes about 5.0 MB.
``tests/test_experience.py`` measures it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from stackrl.blocks.retrieval import RETRIEVALS, LexicalIndex
from stackrl.blocks.selfinstruct import rouge_tokens
from stackrl.errors import ConfigError, PluginError

EVICTIONS = ("oldest", "lowest_utility")
TEXT_FIELDS = ("prompt", "completion", "artefact")  # what retrieval may compare a query with
STATE_VERSION = 1


@dataclass
class Experience:
    """One record: a completion of a prompt at a step, and what the method made of it.

    ``artefact`` is a text distilled from it (a skill, a principle, a document; empty for a raw trajectory),
    ``utility`` the method's running judgement of the record, ``behaviour_logprobs`` the completion's token
    log-probs under the policy that sampled it (for replay through ``Samples.behaviour_logprobs``). An empty
    ``key`` is given one when the record is added (``"<step>:<serial>"``).
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    completion: str = ""
    prompt: str = ""
    rewards: dict[str, float] = field(default_factory=dict)
    step: int = 0
    tags: list[str] = field(default_factory=list)
    artefact: str = ""
    utility: float = 0.0
    behaviour_logprobs: list[float] | None = None
    key: str = ""

    @classmethod
    def of_row(cls, rollout, row: int, step: int, **fields) -> Experience:
        """Row ``row`` of a :class:`stackrl.Rollout` as a record of ``step``: its prompt and completion tokens and
        text and its reward components; ``fields`` set the others (``tags``, ``utility``, ``behaviour_logprobs``,
        ...)."""
        return cls(
            prompt_ids=list(rollout.prompt_ids[row]),
            completion_ids=list(rollout.completion_ids[row]),
            completion=rollout.completions[row],
            prompt=prompt_text(rollout.prompts[row]),
            rewards={name: float(values[row]) for name, values in rollout.rewards.items()},
            step=step,
            **fields,
        )

    @property
    def prompt_key(self) -> tuple[int, ...]:
        """The prompt as a lookup key: its token ids (text and chat prompts alike)."""
        return tuple(self.prompt_ids)


@dataclass
class ExperienceSettings:
    """A plugin's library, its config's ``experience`` section."""

    capacity: int = 1024  # records kept; adding past it evicts by `eviction`
    per_prompt: int = 0  # records kept per prompt (0: no limit); past it, the prompt's own record is evicted
    eviction: str = "oldest"  # oldest | lowest_utility (ties: the oldest of them)
    retrieval: str = "rouge_l"  # rouge_l | bm25 (needs `pip install 'stackrl[bm25]'`)
    indexed: str = "prompt"  # the text field a query is compared with: prompt, completion or artefact
    max_state_bytes: int = 256 * 2**20  # a checkpoint's state of the library may not pass this

    def check(self, section: str) -> None:
        """Refuse a bad setting with a config error naming ``<section>.experience.<key>``."""
        key = f"{section}.experience"
        if self.capacity < 1:
            raise ConfigError(f"{key}.capacity must be at least 1, not {self.capacity}")
        if self.per_prompt < 0:
            raise ConfigError(f"{key}.per_prompt must be 0 (no limit) or more, not {self.per_prompt}")
        if self.eviction not in EVICTIONS:
            raise ConfigError(f"{key}.eviction must be one of {', '.join(EVICTIONS)}, not '{self.eviction}'")
        if self.retrieval not in RETRIEVALS:
            raise ConfigError(f"{key}.retrieval must be one of {', '.join(RETRIEVALS)}, not '{self.retrieval}'")
        if self.indexed not in TEXT_FIELDS:
            raise ConfigError(f"{key}.indexed must be one of {', '.join(TEXT_FIELDS)}, not '{self.indexed}'")
        if self.max_state_bytes < 1:
            raise ConfigError(f"{key}.max_state_bytes must be at least 1, not {self.max_state_bytes}")
        if self.retrieval == "bm25":
            try:
                import bm25s  # noqa: F401
            except ImportError:
                raise ConfigError(
                    f"{key}.retrieval: bm25 needs the bm25s package: pip install 'stackrl[bm25]' (or use rouge_l)"
                ) from None


class ExperienceLibrary:
    """Records under unique keys, oldest first; ``section`` is the plugin's config section, named in errors."""

    def __init__(self, settings: ExperienceSettings, section: str):
        settings.check(section)
        self.settings = settings
        self.section = section
        self._records: dict[str, Experience] = {}  # insertion order is age: the first is the oldest
        self._serial = 0  # records ever added: each new record's place in the order, and a fresh key's suffix
        self._order: dict[str, int] = {}
        self._tokens: dict[str, list[str]] = {}  # each record's indexed text, as retrieval tokenizes it
        self._by_prompt: dict[tuple[int, ...], dict[str, None]] = {}  # each prompt's record keys, oldest first
        self._index: LexicalIndex | None = None  # of the records in order, rebuilt after a change

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Experience]:
        """The records, oldest first."""
        return iter(list(self._records.values()))

    def __contains__(self, key: str) -> bool:
        return key in self._records

    def get(self, key: str) -> Experience | None:
        return self._records.get(key)

    # -- adding and evicting ----------------------------------------------------------------------------------------

    def add(self, record: Experience) -> list[Experience]:
        """Keep ``record`` as the newest (a record of the same key is replaced); returns the records evicted to keep
        ``per_prompt`` and ``capacity``."""
        if not record.key:
            record.key = f"{record.step}:{self._serial}"
        self._check_utility(record.key, record.utility)
        self._drop(record.key)
        self._keep(record, self._serial)
        self._serial += 1
        evicted = []
        if self.settings.per_prompt:
            same = self.of_prompt(record.prompt_ids)
            while len(same) > self.settings.per_prompt:
                evicted.append(self._evict(same))
                same.remove(evicted[-1])
        while len(self._records) > self.settings.capacity:
            evicted.append(self._evict(list(self._records.values())))
        return evicted

    def remove(self, key: str) -> Experience | None:
        record = self._records.get(key)
        self._drop(key)
        return record

    def set_utility(self, key: str, utility: float) -> None:
        """A record's new utility (what ``eviction: lowest_utility`` evicts by)."""
        if key not in self._records:
            raise PluginError(f"{self.section}: no experience record '{key}' to set the utility of")
        self._check_utility(key, utility)
        self._records[key].utility = float(utility)

    def _check_utility(self, key: str, utility: float) -> None:
        if not math.isfinite(utility):
            raise PluginError(f"{self.section}: utility {utility} of experience record '{key}' is not finite")

    def _evict(self, candidates: list[Experience]) -> Experience:
        if self.settings.eviction == "lowest_utility":
            victim = min(candidates, key=lambda r: (r.utility, self._order[r.key]))
        else:
            victim = min(candidates, key=lambda r: self._order[r.key])
        self._drop(victim.key)
        return victim

    def _keep(self, record: Experience, order: int) -> None:
        self._records[record.key] = record
        self._order[record.key] = order
        self._tokens[record.key] = rouge_tokens(getattr(record, self.settings.indexed))
        self._by_prompt.setdefault(record.prompt_key, {})[record.key] = None
        self._index = None

    def _drop(self, key: str) -> None:
        if key in self._records:
            prompt = self._records[key].prompt_key
            del self._records[key], self._order[key], self._tokens[key], self._by_prompt[prompt][key]
            if not self._by_prompt[prompt]:
                del self._by_prompt[prompt]
            self._index = None

    # -- finding ----------------------------------------------------------------------------------------------------

    def of_prompt(self, prompt_ids: Sequence[int]) -> list[Experience]:
        """The records of one prompt (by its token ids), oldest first."""
        return [self._records[key] for key in self._by_prompt.get(tuple(prompt_ids), ())]

    def search(self, query: str, k: int, *, tags: Sequence[str] = ()) -> list[tuple[Experience, float]]:
        """The ``k`` records whose indexed text is closest to ``query`` (ROUGE-L F or BM25 score), best first, each
        with its score; only records with every tag of ``tags`` and a score above 0; ties go to the newer."""
        if k < 1 or not self._records:
            return []
        records = list(self._records.values())
        scores = self._scores(rouge_tokens(query), records)
        wanted = set(tags)
        found = [(r, s) for r, s in zip(records, scores) if s > 0 and wanted.issubset(r.tags)]
        found.sort(key=lambda pair: (-pair[1], -self._order[pair[0].key]))
        return found[:k]

    def _scores(self, query: list[str], records: list[Experience]) -> list[float]:
        if self._index is None:
            self._index = LexicalIndex([self._tokens[r.key] for r in records], self.settings.retrieval)
        return self._index.scores(query)

    # -- checkpoints ------------------------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """The records as plain values and two flat tensors (token ids, log-probs): what a weights-only load accepts.
        A state past ``max_state_bytes`` is refused with an error naming the setting."""
        records = list(self._records.values())
        tokens = [t for r in records for t in (*r.prompt_ids, *r.completion_ids)]
        logprobs = [v for r in records for v in (r.behaviour_logprobs or ())]
        state = {
            "version": STATE_VERSION,
            "serial": self._serial,
            "tokens": torch.tensor(tokens, dtype=torch.int32),
            "logprobs": torch.tensor(logprobs, dtype=torch.float32),
            "records": [
                [r.key, self._order[r.key], len(r.prompt_ids), len(r.completion_ids),
                 -1 if r.behaviour_logprobs is None else len(r.behaviour_logprobs), r.completion, r.prompt,
                 dict(r.rewards), r.step, list(r.tags), r.artefact, r.utility]
                for r in records
            ],
        }
        size = state_bytes(state)
        if size > self.settings.max_state_bytes:
            raise PluginError(
                f"{self.section}.experience.max_state_bytes: the library's checkpoint state is {size} bytes "
                f"({len(records)} records), past the cap of {self.settings.max_state_bytes}; lower "
                f"{self.section}.experience.capacity or raise the cap (no checkpoint was written)"
            )
        return state

    def load_state_dict(self, state: dict) -> None:
        if state.get("version") != STATE_VERSION:
            raise PluginError(
                f"{self.section}: the checkpoint's experience library has version {state.get('version')}; this "
                f"stackrl reads version {STATE_VERSION}"
            )
        tokens, logprobs = state["tokens"].tolist(), state["logprobs"].tolist()
        self._records, self._order, self._tokens, self._by_prompt, self._index = {}, {}, {}, {}, None
        at = lp_at = 0
        for key, order, n_prompt, n_completion, n_logprobs, completion, prompt, rewards, step, tags, artefact, \
                utility in state["records"]:
            record = Experience(
                prompt_ids=tokens[at : at + n_prompt],
                completion_ids=tokens[at + n_prompt : at + n_prompt + n_completion],
                completion=completion, prompt=prompt, rewards=dict(rewards), step=step, tags=list(tags),
                artefact=artefact, utility=utility, key=key,
                behaviour_logprobs=None if n_logprobs < 0 else logprobs[lp_at : lp_at + n_logprobs],
            )
            at += n_prompt + n_completion
            lp_at += max(n_logprobs, 0)
            self._keep(record, order)
        self._serial = state["serial"]
        while len(self._records) > self.settings.capacity:  # a resumed run may keep fewer
            self._evict(list(self._records.values()))


def state_bytes(state: dict) -> int:
    """The bytes ``torch.save`` writes for ``state``: what it adds to a checkpoint."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.tell()


def prompt_text(prompt) -> str:
    """A prompt as text, as a record keeps it (``Experience.prompt``) and retrieval compares it: a chat prompt's
    messages joined."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(message.get("content", "")) for message in prompt)
