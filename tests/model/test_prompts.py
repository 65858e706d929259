"""The prompts of hetlb.model.prompts: texts that read back, chains that share exactly their common
leading blocks, Zipf draws and mean block counts against their formulas within confidence bounds,
and traces read into the arrays a kernel takes, every bad input a one-line InputError."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from hetlb.constants import PROMPT_KINDS
from hetlb.errors import InputError
from hetlb.kernels.sampling import alias_draw, alias_table
from hetlb.model import prompts as prompts_module
from hetlb.model.prompts import Prompts, Trace, draw_chains, parse_prompts, read_trace

Z = 4.0  # a wide normal quantile: a draw that fails this is wrong, not unlucky
P_FLOOR = 1e-4  # the smallest p-value of a chi-square test that passes, for the same reason


def write_trace(path, records) -> str:
    """Write ``records`` (dicts, or raw texts for a line) as a JSONL trace; its path."""
    lines = [record if isinstance(record, str) else json.dumps(record) for record in records]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def request(timestamp, hash_ids, input_length=None, output_length=7):
    return {
        "timestamp": timestamp,
        "input_length": 512 * len(hash_ids or "") if input_length is None else input_length,
        "output_length": output_length,
        "hash_ids": hash_ids,
    }


def assert_ids_name_leading_chains(chains):
    """Equal ids <=> equal leading chains, over every block of every chain."""
    chain_of_id: dict[int, tuple] = {}
    id_of_chain: dict[tuple, int] = {}
    for chain in chains:
        for i, block in enumerate(chain.tolist()):
            leading = tuple(chain[: i + 1].tolist())
            assert chain_of_id.setdefault(block, leading) == leading
            assert id_of_chain.setdefault(leading, block) == block


def common_leading(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


# --- texts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,canonical",
    [
        ("none", "none"),
        ("  none ", "none"),
        ("shared:count=8,blocks=4,zipf=1.1,unique=2", "shared:count=8,blocks=4,zipf=1.1,unique=2"),
        ("shared: unique=0, zipf=0.3, blocks=1e3, count=2", "shared:count=2,blocks=1000,zipf=0.3,unique=0"),
        ("shared:count=3,blocks=2,zipf=0.30000000000000004,unique=1", None),
        ("sessions:turns=5,blocks=16,think=2.5", "sessions:turns=5,blocks=16,think=2.5"),
        ("sessions:think=1e-3,blocks=1,turns=1", "sessions:turns=1,blocks=1,think=0.001"),
    ],
)
def test_texts_read_back(text, canonical):
    prompts = Prompts.parse(text)
    assert Prompts.parse(prompts.text) == prompts
    assert prompts.text == (canonical or text)
    assert prompts.code == PROMPT_KINDS[prompts.kind]
    assert parse_prompts("--prompts", prompts) is prompts


def test_trace_text_reads_back(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [request(0, [1, 2])])
    prompts = Prompts.parse(f"trace:{path}")
    assert prompts.text == f"trace:{path}" and Prompts.parse(prompts.text) == prompts
    assert prompts.trace is not None and prompts.trace.n_requests == 1
    assert Prompts("trace", path=path).trace is not None


def test_none_is_the_default_and_has_no_blocks():
    assert Prompts.none() == Prompts() == Prompts.parse("none")
    assert Prompts.none().is_none and Prompts.none().mean_prompt_blocks() == 0 == Prompts.none().mean_reusable_blocks()
    assert [len(chain) for chain in draw_chains(Prompts.none(), 3, np.random.default_rng(0))] == [0, 0, 0]


def test_kernel_parameters():
    shared = Prompts.parse("shared:count=8,blocks=4,zipf=1.1,unique=2")
    assert shared.integer_parameters().tolist() == [8, 4, 2, 1, 32, 0]
    assert shared.integer_parameters().dtype == np.int64 and shared.unique_id_start == 32
    assert shared.real_parameters().tolist() == [1.1, 1.0]
    sessions = Prompts.parse("sessions:turns=5,blocks=16,think=2.5")
    assert sessions.integer_parameters().tolist() == [1, 16, 0, 5, 0, 80] and sessions.session_stride == 80
    assert sessions.real_parameters().tolist() == [1.0, 2.5]
    with pytest.raises(ValueError, match="belongs to shared prompts"):
        sessions.popularity()


# --- shared prefixes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("count,zipf", [(1, 1.0), (6, 0.8), (40, 1.5)])
def test_popularity_is_zipf(count, zipf):
    popularity = Prompts("shared", count=count, blocks=2, zipf=zipf).popularity()
    weights = [k**-zipf for k in range(1, count + 1)]
    assert np.allclose(popularity, [w / math.fsum(weights) for w in weights], rtol=1e-13, atol=0)


@pytest.mark.parametrize("count,zipf", [(1, 1.0), (7, 0.9), (200, 1.2)])
def test_alias_table_holds_the_popularity(count, zipf):
    """The law the table encodes: bucket i (chance 1/K) keeps i with chance keep[i], else gives alias[i]."""
    prompts = Prompts("shared", count=count, blocks=1, zipf=zipf)
    keep, alias = alias_table(prompts.popularity())
    encoded = keep / count
    np.add.at(encoded, alias, (1.0 - keep) / count)
    assert np.allclose(encoded, prompts.popularity(), rtol=1e-9, atol=1e-15)


def chi_square_p_value(counts, probabilities) -> float:
    expected = np.sum(counts) * np.asarray(probabilities)
    return float(stats.chisquare(counts, expected).pvalue)


def test_prefixes_are_drawn_with_zipf_popularity():
    prompts = Prompts.parse("shared:count=12,blocks=3,zipf=1.3,unique=1")
    chains = draw_chains(prompts, 30_000, np.random.default_rng(5))
    counts = np.bincount([chain[0] // prompts.blocks for chain in chains], minlength=prompts.count)
    assert chi_square_p_value(counts, prompts.popularity()) > P_FLOOR


def test_alias_draws_have_zipf_popularity():
    prompts = Prompts.parse("shared:count=12,blocks=3,zipf=0.7,unique=1")
    keep, alias = alias_table(prompts.popularity())
    draw = getattr(alias_draw, "py_func", alias_draw)  # the kernels' draw, as plain Python
    uniforms = np.random.default_rng(8).random(30_000)
    counts = np.bincount([draw(keep, alias, u) for u in uniforms], minlength=prompts.count)
    assert chi_square_p_value(counts, prompts.popularity()) > P_FLOOR


def test_shared_chains_share_exactly_their_prefix():
    prompts = Prompts.parse("shared:count=4,blocks=3,zipf=1,unique=2")
    chains = draw_chains(prompts, 300, np.random.default_rng(2))
    assert all(len(chain) == 5 for chain in chains)
    prefixes = [int(chain[0]) // 3 for chain in chains]
    for a in range(len(chains)):
        for b in range(a + 1, len(chains)):
            shared = set(chains[a].tolist()) & set(chains[b].tolist())
            if prefixes[a] == prefixes[b]:
                assert common_leading(chains[a], chains[b]) == 3 and len(shared) == 3
            else:
                assert not shared
    assert_ids_name_leading_chains(chains)
    assert [chain[3:].tolist() for chain in chains[:2]] == [[12, 13], [14, 15]]  # K B + r U + u


def test_shared_reusable_blocks_against_the_distinct_prefixes_seen():
    """A cache that keeps every block hits B blocks of each request but the first of its prefix: the
    hits over n requests are B (n - D_n), D_n the prefixes seen, E D_n = sum_k 1 - (1 - p_k)^n and
    Var D_n <= E D_n (occupancy indicators are negatively correlated)."""
    prompts = Prompts.parse("shared:count=1000,blocks=4,zipf=1.0,unique=3")
    n = 3000
    chains = draw_chains(prompts, n, np.random.default_rng(3))
    seen: set[int] = set()
    hits = 0
    for chain in chains:
        hits += sum(block in seen for block in chain.tolist())
        seen.update(chain.tolist())
    distinct = float(np.sum(1.0 - (1.0 - prompts.popularity()) ** n))
    expected = prompts.mean_reusable_blocks() * (n - distinct) / n
    assert abs(hits / n - expected) <= Z * prompts.blocks * math.sqrt(distinct) / n
    assert np.mean([len(chain) for chain in chains]) == prompts.mean_prompt_blocks()


# --- sessions ---------------------------------------------------------------------------------------------


def test_each_turn_extends_the_previous_by_b_blocks():
    prompts = Prompts.parse("sessions:turns=4,blocks=3,think=1")
    chains = draw_chains(prompts, 4 * 6 + 2, np.random.default_rng(0))
    for i, chain in enumerate(chains):
        turn = i % 4
        assert len(chain) == 3 * (turn + 1)
        if turn > 0:
            assert chain[: len(chains[i - 1])].tolist() == chains[i - 1].tolist()
        else:
            assert not any(set(chain.tolist()) & set(other.tolist()) for other in chains[:i])
    assert_ids_name_leading_chains(chains)
    assert chains[4].tolist() == [12, 13, 14]  # session 1 starts at T B


@pytest.mark.parametrize("turns,blocks", [(1, 5), (4, 3), (7, 2)])
def test_session_means_over_whole_sessions(turns, blocks):
    """Over whole sessions the mean prompt and the blocks an earlier turn had are exactly the formulas."""
    prompts = Prompts("sessions", turns=turns, blocks=blocks, think=2.0)
    chains = draw_chains(prompts, turns * 9, np.random.default_rng(0))
    seen: set[int] = set()
    hits = 0
    for chain in chains:
        hits += sum(block in seen for block in chain.tolist())
        seen.update(chain.tolist())
    assert np.mean([len(chain) for chain in chains]) == prompts.mean_prompt_blocks() == (turns + 1) * blocks / 2
    assert hits / len(chains) == prompts.mean_reusable_blocks() == (turns - 1) * blocks / 2


# --- traces -----------------------------------------------------------------------------------------------


def test_a_small_trace(tmp_path):
    records = [
        request(1000, [10, 11, 12], output_length=5),
        request(1000, [10, 11, 13], input_length=1500),
        "",
        request(1250.5, []),
        json.dumps({**request(3000, [11, 12]), "extra": "ignored"}),  # 11 after no parent, 12 after 11
        request(4000, [10, 11, 12, 14], output_length=0),
    ]
    trace = read_trace(write_trace(tmp_path / "trace.jsonl", records))
    assert trace.n_requests == 5
    assert trace.arrival_ms.tolist() == [1000, 1000, 1250.5, 3000, 4000] and trace.arrival_ms.dtype == np.float64
    assert trace.input_tokens.tolist() == [1536, 1500, 0, 1024, 2048] and trace.input_tokens.dtype == np.int64
    assert trace.output_tokens.tolist() == [5, 7, 7, 7, 0]
    assert trace.chain_indptr.tolist() == [0, 3, 6, 6, 8, 12]
    assert trace.chain_blocks.tolist() == [0, 1, 2, 0, 1, 3, 4, 5, 0, 1, 2, 6]
    assert trace.n_distinct_blocks == 7 and trace.chain(4).tolist() == [0, 1, 2, 6]
    assert trace.mean_blocks == 12 / 5
    assert trace.mean_reusable_blocks == (2 + 3) / 5  # request 1: 10, 11; request 4: 10, 11, 12
    assert np.allclose(trace.arrival_epochs_s, [0, 0, 0.2505, 2, 3])
    assert trace.arrival_rate_per_s == 4 / 3
    rescaled = trace.rescaled_arrivals(8.0)
    assert rescaled[0] == 0 and np.isclose((trace.n_requests - 1) / rescaled[-1], 8.0)
    assert np.allclose(rescaled / rescaled[-1], trace.arrival_epochs_s / 3)


def test_a_trace_at_one_instant_has_no_rate(tmp_path):
    trace = read_trace(write_trace(tmp_path / "t.jsonl", [request(5, [1])]))
    with pytest.raises(InputError, match="share one timestamp"):
        trace.rescaled_arrivals(1.0)


def generated_records(n, rng):
    """Requests whose raw ids come from a small alphabet (so that ids recur after other parents),
    some extending an earlier request's ids, at non-decreasing timestamps."""
    records, ids_of = [], []
    timestamp = 0
    for _ in range(n):
        timestamp += int(rng.integers(0, 3))
        if ids_of and rng.random() < 0.6:
            base = ids_of[int(rng.integers(len(ids_of)))]
            ids = base[: int(rng.integers(len(base) + 1))] + rng.integers(0, 6, int(rng.integers(0, 4))).tolist()
        else:
            ids = rng.integers(0, 6, int(rng.integers(0, 8))).tolist()
        ids_of.append(ids)
        records.append(request(timestamp, ids, output_length=int(rng.integers(0, 100))))
    return records


def test_a_generated_trace_against_its_raw_ids(tmp_path):
    records = generated_records(2000, np.random.default_rng(4))
    trace = read_trace(write_trace(tmp_path / "generated.jsonl", records))
    raw = [record["hash_ids"] for record in records]
    chains = [trace.chain(i) for i in range(trace.n_requests)]
    assert [len(chain) for chain in chains] == [len(ids) for ids in raw]
    assert trace.arrival_ms.tolist() == [record["timestamp"] for record in records]
    assert trace.output_tokens.tolist() == [record["output_length"] for record in records]
    # equal canonical ids <=> equal raw leading runs
    canonical_of_run: dict[tuple, int] = {}
    run_of_canonical: dict[int, tuple] = {}
    for ids, chain in zip(raw, chains):
        for i, block in enumerate(chain.tolist()):
            run = tuple(ids[: i + 1])
            assert canonical_of_run.setdefault(run, block) == block
            assert run_of_canonical.setdefault(block, run) == run
    assert sorted(run_of_canonical) == list(range(trace.n_distinct_blocks))
    # two requests whose raw ids share a leading run share exactly that many canonical ids
    rng = np.random.default_rng(1)
    for a, b in rng.integers(0, len(raw), (3000, 2)):
        common = common_leading(raw[a], raw[b])
        assert common_leading(chains[a], chains[b]) == common
        assert len(set(chains[a].tolist()) & set(chains[b].tolist())) == common
    # a raw id after a different parent is a different block
    reused = [(run, block) for run, block in canonical_of_run.items() if len(run) >= 2 and run[-1] == 3]
    parents = {run[:-1] for run, _ in reused}
    assert len(parents) > 1 and len({block for _, block in reused}) == len(reused)
    # the means, from the raw runs alone
    runs = [tuple(ids[: i + 1]) for ids in raw for i in range(len(ids))]
    assert trace.mean_blocks == len(runs) / len(raw)
    assert trace.mean_reusable_blocks == (len(runs) - len(set(runs))) / len(raw)
    prompts = Prompts.parse(f"trace:{tmp_path / 'generated.jsonl'}")
    assert prompts.mean_prompt_blocks() == trace.mean_blocks
    assert prompts.mean_reusable_blocks() == trace.mean_reusable_blocks
    assert [chain.tolist() for chain in draw_chains(prompts, 50, np.random.default_rng(0))] == [
        chain.tolist() for chain in chains[:50]
    ]


def test_big_integer_ids_read_the_same_with_either_reader(tmp_path, monkeypatch):
    big = 2**100
    path = write_trace(tmp_path / "t.jsonl", [request(0, [big, 1]), request(1, [big, 2])])
    first = read_trace(path)
    monkeypatch.setattr(prompts_module, "json_reader", lambda: json.loads)
    second = read_trace(path)
    assert first.chain_blocks.tolist() == second.chain_blocks.tolist() == [0, 1, 0, 2]


# --- bad input --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,field,words",
    [
        ("", "--prompts", "non-empty text"),
        ("lru:size=3", "--prompts", "none, shared:count=K"),
        ("none:count=3", "--prompts", "none takes no parameters"),
        ("shared:count=2,blocks=3,zipf=1", "--prompts", "missing unique"),
        ("shared:count=2,blocks=3,zipf=1,unique=0,turns=2", "--prompts", "not 'turns'"),
        ("shared:count=2,blocks=3,zipf=1,unique=0,count=3", "--prompts.count", "given twice"),
        ("shared:count=2,blocks,zipf=1,unique=0", "--prompts", "KEY=NUMBER"),
        ("shared:count=0,blocks=3,zipf=1,unique=0", "--prompts.count", ">= 1"),
        ("shared:count=2,blocks=0,zipf=1,unique=0", "--prompts.blocks", ">= 1"),
        ("shared:count=2.5,blocks=3,zipf=1,unique=0", "--prompts.count", "integer"),
        ("shared:count=2,blocks=3,zipf=0,unique=0", "--prompts.zipf", "> 0"),
        ("shared:count=2,blocks=3,zipf=-1,unique=0", "--prompts.zipf", "> 0"),
        ("shared:count=2,blocks=3,zipf=nan,unique=0", "--prompts.zipf", "finite"),
        ("shared:count=2,blocks=3,zipf=inf,unique=0", "--prompts.zipf", "finite"),
        ("shared:count=2,blocks=3,zipf=1,unique=-1", "--prompts.unique", ">= 0"),
        ("shared:count=two,blocks=3,zipf=1,unique=0", "--prompts.count", "must be a number"),
        ("shared:count=2,blocks=3,zipf=1,unique=1e9", "--prompts", "blocks + unique"),
        ("shared:count=1e15,blocks=3,zipf=1,unique=0", "--prompts.count", "memory"),
        ("shared:count=1e18,blocks=1e3,zipf=1,unique=0", "--prompts", "2^62"),
        ("sessions:turns=0,blocks=3,think=1", "--prompts.turns", ">= 1"),
        ("sessions:turns=2,blocks=3,think=0", "--prompts.think", "> 0"),
        ("sessions:turns=2,blocks=3,think=-2", "--prompts.think", "> 0"),
        ("sessions:turns=2,blocks=3", "--prompts", "missing think"),
        ("sessions:turns=5000,blocks=5000,think=1", "--prompts", "turns x blocks"),
        ("trace:", "--prompts", "trace:FILE"),
        ("trace:/no/such/trace.jsonl", "--prompts", "no such file"),
    ],
)
def test_bad_texts(text, field, words):
    with pytest.raises(InputError) as caught:
        parse_prompts("--prompts", text)
    assert caught.value.field == field and words in caught.value.rule
    assert "\n" not in str(caught.value)


def test_bad_parameters_in_python():
    with pytest.raises(InputError, match=r"prompts.count: is a parameter of shared prompts, not of sessions"):
        Prompts("sessions", count=3, turns=2, blocks=2)
    with pytest.raises(InputError, match=r"prompts: must be none, shared"):
        Prompts("lru")
    with pytest.raises(InputError, match=r"prompts.zipf"):
        Prompts("shared", zipf=True)
    with pytest.raises(InputError, match=r"prompts.path"):
        Prompts("trace")


GOOD = json.dumps(request(10, [1, 2]))


@pytest.mark.parametrize(
    "line,words",
    [
        ('{"timestamp": 1, ', "is not JSON"),
        ("[1, 2]", "must be a JSON object, got [1, 2]"),
        ('"text"', "must be a JSON object"),
        (json.dumps({"input_length": 1, "output_length": 1, "hash_ids": []}), "has no timestamp"),
        (json.dumps({"timestamp": 11, "output_length": 1, "hash_ids": []}), "has no input_length"),
        (json.dumps({"timestamp": 11, "input_length": 1, "hash_ids": []}), "has no output_length"),
        (json.dumps({"timestamp": 11, "input_length": 1, "output_length": 1}), "has no hash_ids"),
        (json.dumps(request(11, "x")), "hash_ids: must be a list of integers, got 'x'"),
        (json.dumps(request(11, [1, "x"])), "hash_ids: must be a list of integers, got 'x'"),
        (json.dumps(request(11, [1, True])), "hash_ids: must be a list of integers, got True"),
        (json.dumps(request(11, [1, 2.0])), "hash_ids: must be a list of integers, got 2.0"),
        (json.dumps(request(11, None)), "hash_ids: must be a list of integers, got None"),
        (json.dumps(request(11, [1], input_length=-1)), "input_length: must be an integer >= 0"),
        (json.dumps(request(11, [1], input_length=12.5)), "input_length: must be an integer >= 0"),
        (json.dumps(request(11, [1], input_length=False)), "input_length: must be an integer >= 0"),
        (json.dumps(request(11, [1], input_length=2**70)), "input_length: must be an integer >= 0"),
        (json.dumps(request(11, [1], output_length=-3)), "output_length: must be an integer >= 0"),
        (json.dumps(request(11, [1], output_length="7")), "output_length: must be an integer >= 0"),
        (json.dumps(request(9, [1])), "timestamp: must not decrease, got 9.0 after 10.0"),
        (json.dumps(request("11", [1])), "timestamp: must be a finite number"),
        (json.dumps(request(True, [1])), "timestamp: must be a finite number"),
        ('{"timestamp": 1e999, "input_length": 1, "output_length": 1, "hash_ids": []}', "timestamp"),
        ('{"timestamp": NaN, "input_length": 1, "output_length": 1, "hash_ids": []}', "timestamp"),
    ],
)
@pytest.mark.parametrize("reader", ["default", "json"])
def test_bad_trace_lines(tmp_path, monkeypatch, line, words, reader):
    """The third line is bad (the second blank): the error names the field, the file and line 3."""
    if reader == "json":
        monkeypatch.setattr(prompts_module, "json_reader", lambda: json.loads)
    path = write_trace(tmp_path / "trace.jsonl", [GOOD, "", line])
    with pytest.raises(InputError) as caught:
        read_trace(path, "--prompts")
    message = str(caught.value)
    assert caught.value.field == "--prompts" and "trace.jsonl line 3: " in message
    if reader == "json" or "NaN" not in line and "1e999" not in line:  # orjson: not JSON at all
        assert words in message
    assert "\n" not in message and len(message) < 400


def test_bad_trace_files(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n\n")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe{}\n")
    for path, words in [
        (empty, "has no requests"),
        (blank, "has no requests"),
        (tmp_path, "is a folder"),
        (tmp_path / "missing.jsonl", "no such file"),
        (binary, "binary.jsonl line 1: is not JSON"),
    ]:
        with pytest.raises(InputError) as caught:
            Prompts.parse(f"trace:{path}")
        assert caught.value.field == "prompts" and words in caught.value.rule and "\n" not in str(caught.value)


def test_a_long_bad_value_stays_one_short_line(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [json.dumps(request(1, ["x\n" * 5000]))])
    with pytest.raises(InputError) as caught:
        read_trace(path)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 400 and "line 1" in str(caught.value)


def test_draw_chains_checks_its_count(tmp_path):
    prompts = Prompts("trace", path=write_trace(tmp_path / "t.jsonl", [request(0, [1])]))
    with pytest.raises(InputError, match="has 1 requests, not 2"):
        draw_chains(prompts, 2, np.random.default_rng(0))
    with pytest.raises(InputError, match="n: must be an integer >= 0"):
        draw_chains(Prompts.none(), -1, np.random.default_rng(0))
    assert isinstance(prompts.trace, Trace)
