"""The prompts of jobs as chains of cache blocks, for a model of prefix (KV) caches in inference servers.

A prompt is cut into blocks of a fixed number of tokens (16 in vLLM, 512 in the Mooncake traces),
and block i is named by a hash of blocks 0..i, so two prompts share exactly their common leading
blocks. Here a block's name is an int64 id with **equal ids <=> equal leading chains**: an id is
never given to two different chains. A prompt's chain is an int64 array of ids, block 0 first.

Kinds (PROMPTS_SYNTAX; integer codes in hetlb.constants.PROMPT_KINDS):

* ``none`` (default): jobs have no prompt and the cache has no effect.
* ``shared:count=K,blocks=B,zipf=S,unique=U``: K shared prefixes of B blocks each; a request
  picks prefix k (k = 1..K) with Zipf popularity p_k = k^-S / sum_i i^-S (S > 0), then has U
  blocks of its own. Ids: block j (0 <= j < B) of prefix k is (k - 1) B + j; the unique blocks of
  request r (r = 0, 1, ... in arrival order) are K B + r U + u (0 <= u < U). A kernel keeps one
  counter of unique ids, starting at K B (``unique_id_start``), that each request advances by U:
  nothing is stored per request.
* ``sessions:turns=T,blocks=B,think=Z``: conversations. A session starts at each arrival of the
  external arrival process and sends T turns; turn t (t = 1..T) is a prompt of t B blocks, the
  previous turn's chain plus B new blocks, and turn t + 1 arrives Z time units (the model's unit)
  after turn t's answer completes. Ids: block j (0 <= j < T B) of session n (n = 0, 1, ... in
  order of start) is n T B + j, so turn t's chain is n T B + (0..t B - 1). A kernel keeps a
  session counter and, for each session alive, its first id n T B (``session_stride`` is T B)
  and its turn: storage grows with the sessions alive, not with the jobs.
* ``trace:FILE``: the requests of a Mooncake-format JSONL trace (:func:`read_trace`): arrival
  times, token counts and chains, the trace's block ids remapped to canonical ids.

Ids stay below 2^63 as long as K B + r U (shared, after r requests) or n T B (sessions, after n
sessions) does. Per prompt, the expected number of blocks (:meth:`Prompts.mean_prompt_blocks`)
and of blocks an earlier prompt also had (:meth:`Prompts.mean_reusable_blocks`, the hits of a
cache that keeps every block) are:

==========  ===================  =======================================
kind        blocks per prompt    reusable blocks per prompt
==========  ===================  =======================================
none        0                    0
shared      B + U                B (in the long run)
sessions    (T + 1) B / 2        (T - 1) B / 2
trace       the trace's mean     the trace's mean (Trace)
==========  ===================  =======================================
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

import numpy as np

from hetlb import validation
from hetlb.constants import PROMPT_KINDS
from hetlb.errors import InputError

PROMPTS_SYNTAX = "none, shared:count=K,blocks=B,zipf=S,unique=U, sessions:turns=T,blocks=B,think=Z or trace:FILE"
PROMPT_KEYS = {"none": (), "shared": ("count", "blocks", "zipf", "unique"), "sessions": ("turns", "blocks", "think")}
"""The parameters each kind's text takes (``trace`` takes a file)."""
INTEGER_KEYS = ("count", "blocks", "unique", "turns")

MAX_PROMPT_BLOCKS = 2**24
"""The most blocks one prompt may have (B + U, or T B): 16,777,216 blocks, 268M tokens at 16 tokens a
block, far beyond any model's context; a kernel walks a job's chain block by block."""
TRACE_BLOCK_TOKENS = 512
"""Tokens per block of the Mooncake traces' ``hash_ids``."""
TRACE_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
"""The keys every line of a trace has (others are ignored)."""
TRACE_MEMORY_PER_BYTE = 20
"""Bytes of memory that reading a trace takes per byte of its file, an estimate for refusing a file too
large before reading it: 11 measured on a Mooncake-like trace (ids of 6 to 7 digits, half of the
blocks new), doubled for a margin. A new block costs about 200 bytes (its remapping entry, its place
in the chain list and array), so a trace of short ids that are nearly all new can take more."""


@dataclass(frozen=True, eq=False)
class Trace:
    """The requests of a Mooncake-format trace: n requests, in order of arrival.

    Request i's chain is ``chain_blocks[chain_indptr[i]:chain_indptr[i + 1]]`` (compressed sparse
    rows), in canonical ids 0 .. n_distinct_blocks - 1 (:func:`read_trace`). The arrays are the
    kernels' to read, not to change.

    Parameters
    ----------
    path
        The trace's file.
    arrival_ms
        Each request's timestamp (ms, float64, non-decreasing), as the trace gives it.
    input_tokens
        Each request's prompt length (tokens, int64).
    output_tokens
        Each request's answer length (tokens, int64).
    chain_indptr
        Where each request's chain starts in ``chain_blocks`` (int64, n + 1 entries).
    chain_blocks
        The chains, one after the other (int64 canonical ids).
    n_distinct_blocks
        How many different canonical ids the chains hold (they are 0, 1, ..., in order of first
        appearance).
    """

    path: str
    arrival_ms: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    chain_indptr: np.ndarray
    chain_blocks: np.ndarray
    n_distinct_blocks: int

    @property
    def n_requests(self) -> int:
        """n, the number of requests."""
        return len(self.arrival_ms)

    def chain(self, request: int) -> np.ndarray:
        """The chain of canonical ids of request ``request`` (0-based).

        Parameters
        ----------
        request
            The request's index, 0 .. n - 1.
        """
        return self.chain_blocks[self.chain_indptr[request] : self.chain_indptr[request + 1]]

    @property
    def mean_blocks(self) -> float:
        """The mean number of blocks per prompt."""
        return len(self.chain_blocks) / self.n_requests

    @property
    def mean_reusable_blocks(self) -> float:
        """The mean number of a prompt's blocks that an earlier prompt also had: every block but
        the first appearance of each canonical id, per request."""
        return (len(self.chain_blocks) - self.n_distinct_blocks) / self.n_requests

    @property
    def arrival_epochs_s(self) -> np.ndarray:
        """The arrival epochs in seconds from the first request's (so the first is 0)."""
        return (self.arrival_ms - self.arrival_ms[0]) / 1000.0

    @property
    def arrival_rate_per_s(self) -> float:
        """The trace's mean arrival rate: (n - 1) requests over the time from the first to the last
        (requests per second; infinite when all share one timestamp)."""
        span_s = (self.arrival_ms[-1] - self.arrival_ms[0]) / 1000.0
        return (self.n_requests - 1) / span_s if span_s > 0 else math.inf

    def rescaled_arrivals(self, rate: float) -> np.ndarray:
        """The arrival epochs (from 0) stretched by one factor so that their mean rate is ``rate``
        (jobs per time unit of the model): epoch_i = arrival_epochs_s[i] * arrival_rate_per_s / rate.

        Parameters
        ----------
        rate
            The mean arrival rate wanted, in jobs per time unit.
        """
        rate = validation.positive_number("arrival_rate", rate)
        if not math.isfinite(self.arrival_rate_per_s):
            raise InputError(
                "arrival_rate",
                f"the trace {self.path} has no rate to rescale: its {self.n_requests} requests share one timestamp",
            )
        return self.arrival_epochs_s * (self.arrival_rate_per_s / rate)


@dataclass(frozen=True)
class Prompts:
    """The prompts of jobs (module docstring); ``count``, ``blocks``, ``zipf``, ``unique``,
    ``turns`` and ``think`` are K, B, S, U, T and Z, each at its default unless its kind takes it.

    Parameters
    ----------
    kind
        One of ``none``, ``shared``, ``sessions``, ``trace``.
    count
        K, the number of shared prefixes (shared).
    blocks
        B, the blocks of a shared prefix (shared), or the new blocks of each turn (sessions).
    zipf
        S > 0, the Zipf exponent of the prefixes' popularity (shared).
    unique
        U >= 0, the blocks of each request's own after its prefix (shared).
    turns
        T, the turns of a session (sessions).
    think
        Z > 0, the time from a turn's answer to the next turn's arrival (sessions; the model's time unit).
    path
        The trace's file (trace).
    trace
        The trace's requests, read from ``path`` when not given (trace).
    """

    kind: str = "none"
    count: int = 1
    blocks: int = 1
    zipf: float = 1.0
    unique: int = 0
    turns: int = 1
    think: float = 1.0
    path: str | None = None
    trace: Trace | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        checked = checked_parameters("prompts", self.kind, {key: getattr(self, key) for key in PARAMETER_DEFAULTS})
        for key, value in checked.items():
            object.__setattr__(self, key, value)
        if self.kind == "trace" and self.trace is None:
            object.__setattr__(self, "trace", read_trace(self.path, "prompts"))

    @classmethod
    def parse(cls, text) -> Prompts:
        """Prompts from their text (PROMPTS_SYNTAX), or the Prompts given.

        Parameters
        ----------
        text
            The text, as ``--prompts`` takes it.
        """
        return parse_prompts("prompts", text)

    @classmethod
    def none(cls) -> Prompts:
        """No prompts: the cache has no effect."""
        return cls()

    @property
    def code(self) -> int:
        """The kind's integer code, as a kernel reads it (hetlb.constants.PROMPT_KINDS)."""
        return PROMPT_KINDS[self.kind]

    @property
    def is_none(self) -> bool:
        """Whether jobs have no prompts."""
        return self.kind == "none"

    @property
    def text(self) -> str:
        """The canonical text: ``Prompts.parse(p.text) == p``."""
        if self.kind == "shared":
            return f"shared:count={self.count},blocks={self.blocks},zipf={exact_text(self.zipf)},unique={self.unique}"
        if self.kind == "sessions":
            return f"sessions:turns={self.turns},blocks={self.blocks},think={exact_text(self.think)}"
        if self.kind == "trace":
            return f"trace:{self.path}"
        return "none"

    def describe(self) -> str:
        """The prompts as a result's metadata records them: their text."""
        return self.text

    @property
    def unique_id_start(self) -> int:
        """K B, the first id of the requests' unique blocks (shared): request r's are K B + r U + (0..U - 1)."""
        self._require("shared", "unique_id_start")
        return self.count * self.blocks

    @property
    def session_stride(self) -> int:
        """T B, the ids one session takes (sessions): session n's block j is n T B + j."""
        self._require("sessions", "session_stride")
        return self.turns * self.blocks

    def popularity(self) -> np.ndarray:
        """p_k = k^-S / sum_i i^-S for k = 1..K, at index k - 1 (float64; shared)."""
        self._require("shared", "popularity")
        weight = np.arange(1, self.count + 1, dtype=np.float64) ** -self.zipf
        return weight / weight.sum()

    def integer_parameters(self) -> np.ndarray:
        """(K, B, U, T, K B, T B) as int64, for a kernel: count, blocks, unique, turns,
        unique_id_start and session_stride (the products 0 for the kinds they do not belong to)."""
        first_unique = self.count * self.blocks if self.kind == "shared" else 0
        stride = self.turns * self.blocks if self.kind == "sessions" else 0
        return np.array([self.count, self.blocks, self.unique, self.turns, first_unique, stride], dtype=np.int64)

    def real_parameters(self) -> np.ndarray:
        """(S, Z) as float64, for a kernel: zipf and think."""
        return np.array([self.zipf, self.think], dtype=np.float64)

    def mean_prompt_blocks(self) -> float:
        """The expected number of blocks of a prompt: 0 (none), B + U (shared), (T + 1) B / 2
        (sessions, over the turns of a session) or the trace's mean."""
        if self.kind == "shared":
            return float(self.blocks + self.unique)
        if self.kind == "sessions":
            return (self.turns + 1) * self.blocks / 2.0
        if self.kind == "trace":
            assert self.trace is not None
            return self.trace.mean_blocks
        return 0.0

    def mean_reusable_blocks(self) -> float:
        """The expected number of a prompt's blocks that an earlier prompt also had, so that a cache
        keeping every block would hit them: 0 (none); B (shared, in the long run: a prefix is new
        only at its first request); (T - 1) B / 2 (sessions: turn t repeats the (t - 1) B blocks of
        turn t - 1); the trace's own mean (trace)."""
        if self.kind == "shared":
            return float(self.blocks)
        if self.kind == "sessions":
            return (self.turns - 1) * self.blocks / 2.0
        if self.kind == "trace":
            assert self.trace is not None
            return self.trace.mean_reusable_blocks
        return 0.0

    def _require(self, kind: str, what: str) -> None:
        if self.kind != kind:
            raise ValueError(f"{what} belongs to {kind} prompts, not to {self.kind}")


PARAMETER_DEFAULTS = {"count": 1, "blocks": 1, "zipf": 1.0, "unique": 0, "turns": 1, "think": 1.0, "path": None}
"""Prompts' parameters at their defaults: a kind that does not take one leaves it there."""
KIND_PARAMETERS = {**PROMPT_KEYS, "trace": ("path",)}


def exact_text(value: float) -> str:
    """A number as short as ``:g`` writes it when that reads back exactly, else its repr."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def checked_parameters(field: str, kind, values: dict) -> dict:
    """The parameters of ``kind`` (PARAMETER_DEFAULTS' keys) in their canonical types, checked:
    integers K, B, T >= 1 and U >= 0, numbers S, Z > 0, sizes within MAX_PROMPT_BLOCKS and the
    ids within int64, the popularity's memory within the machine's; the others at their defaults."""
    if kind not in PROMPT_KINDS:
        raise InputError(field, f"must be {PROMPTS_SYNTAX}, got {validation.shown(kind)}")
    checked = dict(values)
    for key, default in PARAMETER_DEFAULTS.items():
        if key not in KIND_PARAMETERS[kind]:
            if values[key] != default:
                takers = [name for name, keys in KIND_PARAMETERS.items() if key in keys]
                raise InputError(f"{field}.{key}", f"is a parameter of {' and '.join(takers)} prompts, not of {kind}")
            checked[key] = default
    if kind in ("shared", "sessions"):
        checked["blocks"] = validation.count(f"{field}.blocks", values["blocks"])
    if kind == "shared":
        checked["count"] = validation.count(f"{field}.count", values["count"])
        checked["unique"] = validation.count(f"{field}.unique", values["unique"], low=0)
        checked["zipf"] = validation.number(f"{field}.zipf", values["zipf"], 0.0, strict=True)
        length = checked["blocks"] + checked["unique"]
        if length > MAX_PROMPT_BLOCKS:
            raise InputError(field, f"blocks + unique must be <= {MAX_PROMPT_BLOCKS:,} blocks a prompt, got {length:,}")
        if checked["count"] * checked["blocks"] > validation.MAX_COUNT:
            raise InputError(field, "count x blocks must be <= 2^62: the block ids are int64")
        validation.check_memory(
            f"{field}.count",
            24 * checked["count"],
            f"the popularity of {validation.quantity(checked['count'])} prefixes",
            advice="take fewer prefixes",
        )
    if kind == "sessions":
        checked["turns"] = validation.count(f"{field}.turns", values["turns"])
        checked["think"] = validation.number(f"{field}.think", values["think"], 0.0, strict=True, high=1e12)
        if checked["turns"] * checked["blocks"] > MAX_PROMPT_BLOCKS:
            raise InputError(
                field,
                f"turns x blocks must be <= {MAX_PROMPT_BLOCKS:,} blocks a prompt, "
                f"got {checked['turns'] * checked['blocks']:,}",
            )
    if kind == "trace":
        checked["path"] = str(validation.path(f"{field}.path", values["path"]))
    return checked


def parse_prompts(field: str, text) -> Prompts:
    """Prompts from their text (PROMPTS_SYNTAX), every error an InputError naming ``field``
    (``field.KEY`` for a parameter); Prompts given are returned as they are.

    Parameters
    ----------
    field
        What the text was given as (``prompts``, ``--prompts``): the errors' field.
    text
        The text.
    """
    if isinstance(text, Prompts):
        return text
    text = validation.text(field, text).strip()
    kind, colon, rest = text.partition(":")
    kind = kind.strip()
    if kind == "trace":
        path = rest.strip()
        if not path:
            raise InputError(field, f"trace takes a file, trace:FILE, got {validation.shown(text)}")
        checked = checked_parameters(field, "trace", {**PARAMETER_DEFAULTS, "path": path})
        return Prompts("trace", path=checked["path"], trace=read_trace(checked["path"], field))
    if kind not in PROMPT_KEYS:
        raise InputError(field, f"must be {PROMPTS_SYNTAX}, got {validation.shown(text)}")
    allowed = PROMPT_KEYS[kind]
    if not allowed and (colon or rest):
        raise InputError(field, f"none takes no parameters, got {validation.shown(text)}")
    values: dict = {}
    for item in (item.strip() for item in rest.split(",")):
        if not item:
            continue
        key, equals, value = (part.strip() for part in item.partition("="))
        if not equals:
            raise InputError(field, f"{validation.shown(item)}: each parameter is KEY=NUMBER")
        if key not in allowed:
            raise InputError(
                field,
                f"{kind} takes {', '.join(allowed)}, not {validation.shown(key)}, in {validation.shown(text)}",
            )
        if key in values:
            raise InputError(f"{field}.{key}", f"is given twice in {validation.shown(text)}")
        values[key] = number_of(f"{field}.{key}", value, integer=key in INTEGER_KEYS)
    missing = [key for key in allowed if key not in values]
    if missing:
        raise InputError(
            field, f"{kind} takes {','.join(f'{key}=...' for key in allowed)}; missing {', '.join(missing)}"
        )
    checked = checked_parameters(field, kind, {**PARAMETER_DEFAULTS, **values})
    return Prompts(kind, **{key: checked[key] for key in allowed})


def number_of(field: str, text: str, integer: bool):
    """The number a parameter's text writes: an int when ``integer`` and it is whole (``1e6`` too),
    else a float."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise InputError(field, f"must be a number, got {validation.shown(text)}") from None
    return int(value) if integer and value.is_integer() else value


# --- traces -----------------------------------------------------------------------------------------


def json_reader():
    """orjson's ``loads`` when it is installed (several times faster), else the standard library's."""
    try:
        import orjson
    except ImportError:
        return json.loads
    return orjson.loads


def read_trace(path, field: str = "prompts") -> Trace:
    """The requests of a Mooncake-format JSONL trace.

    Each line is one JSON object with ``timestamp`` (ms, non-decreasing), ``input_length`` and
    ``output_length`` (tokens, integers >= 0) and ``hash_ids`` (the ids of the prompt's blocks of
    TRACE_BLOCK_TOKENS tokens, a list of integers, maybe empty); other keys are ignored, and so are
    blank lines. A trace's ids need not name chains (a generator may hash each block alone, or
    reuse an id after another parent), so each block gets a canonical id: that of the pair (the
    canonical id of the block before it, -1 for block 0; its raw id), numbered 0, 1, 2, ... in
    order of first appearance. Two canonical ids are equal exactly when their raw leading runs
    are, and a raw id met after a different parent gets a different canonical id.

    Every error is an InputError naming ``field``, with the file and the line
    (``prompts: trace.jsonl line 12: hash_ids: must be a list of integers, got 'x'``).

    Parameters
    ----------
    path
        The trace's file.
    field
        What the trace was given as: the errors' field.
    """
    found = validation.input_file(field, path)
    text = str(path)
    name = text if len(text) <= validation.MESSAGE_WIDTH else f".../{found.name}"  # the file's name, whole
    with validation.os_errors(field, found):
        size = found.stat().st_size
    validation.check_memory(field, TRACE_MEMORY_PER_BYTE * size, f"reading the trace {name}")
    loads = json_reader()
    arrival_ms: list[float] = []
    input_tokens: list[int] = []
    output_tokens: list[int] = []
    chain_ends: list[int] = [0]
    blocks: list[int] = []
    canonical_of: dict[tuple[int, int], int] = {}
    find = canonical_of.get
    previous_ms = -math.inf
    with validation.os_errors(field, found), found.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{name} line {number}"
            try:
                record = loads(line)
            except ValueError as error:  # orjson's and json's decode errors, and bytes that are not UTF-8
                reason = f"{error.msg} at column {error.colno}" if isinstance(error, json.JSONDecodeError) else error
                raise InputError(field, f"{where}: is not JSON: {reason}") from None
            try:
                timestamp, n_input, n_output, raw_ids = trace_request(field, where, record)
            except InputError:
                if loads is json.loads:
                    raise
                # orjson reads an integer beyond 64 bits as a float: the standard library keeps it an int
                timestamp, n_input, n_output, raw_ids = trace_request(field, where, json.loads(line))
            if timestamp < previous_ms:
                raise InputError(
                    field,
                    f"{where}: timestamp: must not decrease, got {validation.shown(timestamp)} after "
                    f"{validation.shown(previous_ms)}",
                )
            previous_ms = timestamp
            arrival_ms.append(timestamp)
            input_tokens.append(n_input)
            output_tokens.append(n_output)
            parent = -1
            for raw in raw_ids:
                key = (parent, raw)
                canonical = find(key)
                if canonical is None:
                    canonical = canonical_of[key] = len(canonical_of)
                blocks.append(canonical)
                parent = canonical
            chain_ends.append(len(blocks))
    if not arrival_ms:
        raise InputError(field, f"{name}: the trace has no requests (no line holds a JSON object)")
    return Trace(
        path=str(path),
        arrival_ms=np.array(arrival_ms, dtype=np.float64),
        input_tokens=np.array(input_tokens, dtype=np.int64),
        output_tokens=np.array(output_tokens, dtype=np.int64),
        chain_indptr=np.array(chain_ends, dtype=np.int64),
        chain_blocks=np.array(blocks, dtype=np.int64),
        n_distinct_blocks=len(canonical_of),
    )


def trace_request(field: str, where: str, record) -> tuple[float, int, int, list]:
    """(timestamp in ms, input tokens, output tokens, raw ids) of one line's object, checked."""
    if type(record) is not dict:
        raise InputError(field, f"{where}: must be a JSON object, got {validation.shown(record)}")
    for key in TRACE_KEYS:
        if key not in record:
            raise InputError(field, f"{where}: has no {key} (each line has {', '.join(TRACE_KEYS)})")
    timestamp = record["timestamp"]
    if type(timestamp) not in (int, float) or not finite(timestamp):
        raise InputError(field, f"{where}: timestamp: must be a finite number (ms), got {validation.shown(timestamp)}")
    lengths = []
    for key in ("input_length", "output_length"):
        value = record[key]
        if type(value) is not int or not 0 <= value <= validation.MAX_COUNT:
            raise InputError(field, f"{where}: {key}: must be an integer >= 0 (tokens), got {validation.shown(value)}")
        lengths.append(value)
    raw_ids = record["hash_ids"]
    if type(raw_ids) is not list or not all(type(raw) is int for raw in raw_ids):  # bool is not int here
        bad = next((raw for raw in raw_ids if type(raw) is not int), raw_ids) if type(raw_ids) is list else raw_ids
        raise InputError(field, f"{where}: hash_ids: must be a list of integers, got {validation.shown(bad)}")
    return float(timestamp), lengths[0], lengths[1], raw_ids


def finite(value: int | float) -> bool:
    """Whether a JSON number is finite as a float64 (an integer beyond float64's range is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


# --- reference chains -------------------------------------------------------------------------------


def draw_chains(prompts: Prompts, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The chains of n consecutive requests, in pure Python: the reference for tests and slow
    simulators. Shared: requests 0..n-1, each prefix drawn from p_k (numpy's ``choice``, not the
    alias table); sessions: the turns 1..T of session 0, then of session 1, ... (n turns in all);
    trace: its first n requests; none: n empty chains.

    Parameters
    ----------
    prompts
        The prompts.
    n
        How many chains.
    rng
        The generator to draw from (shared prompts draw from it).
    """
    n = validation.count("n", n, low=0)
    validation.check_memory("n", 8 * n * (prompts.mean_prompt_blocks() + 8), f"{n:,} chains")
    if prompts.kind == "shared":
        count, blocks, unique = prompts.count, prompts.blocks, prompts.unique
        prefixes = rng.choice(count, size=n, p=prompts.popularity())
        prefix_block = np.arange(blocks, dtype=np.int64)
        unique_block = np.arange(unique, dtype=np.int64) + count * blocks
        return [
            np.concatenate([int(prefix) * blocks + prefix_block, unique_block + request * unique])
            for request, prefix in enumerate(prefixes)
        ]
    if prompts.kind == "sessions":
        stride, blocks, turns = prompts.session_stride, prompts.blocks, prompts.turns
        return [(turn // turns) * stride + np.arange((turn % turns + 1) * blocks, dtype=np.int64) for turn in range(n)]
    if prompts.kind == "trace":
        assert prompts.trace is not None
        if n > prompts.trace.n_requests:
            raise InputError("n", f"the trace {prompts.path} has {prompts.trace.n_requests:,} requests, not {n:,}")
        return [prompts.trace.chain(request).copy() for request in range(n)]
    return [np.zeros(0, dtype=np.int64) for _ in range(n)]
