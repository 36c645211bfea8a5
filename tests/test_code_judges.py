"""The official graders' rules as pure functions: each accepts what its grader accepts and
rejects what it rejects, the function-call checks, the preludes, the limits read from the data,
the seeded cap on tests, LiveCodeBench's release files and the special-judge checkers. No
sandbox here; tests/test_code_conformance.py runs programs."""

from __future__ import annotations

import pytest

from agon.tasks.code.judges import checkers, taco
from agon.tasks.code.judges import codecontests as cc
from agon.tasks.code.judges import livecodebench as lcb
from agon.tasks.code.limits import cap_tests, duration_seconds, parse_megabytes, parse_seconds
from agon.tasks.code.livecodebench import lcb_release_files
from agon.tasks.code.taco_special import taco_special_judges

# --- LiveCodeBench: testing_util.grade_stdio -------------------------------------------------


@pytest.mark.parametrize(
    ("got", "want"),
    [
        ("0.50\n", "0.5\n"),  # Decimal("0.50") == Decimal("0.5")
        ("1e2", "100"),
        ("3 \n4  \n\n\n", "3\n4\n"),  # each line stripped, the whole output stripped
        ("  1   2\n", "1 2"),  # tokens of a line as Decimals
        ("hello world\n", "hello world"),
    ],
)
def test_lcb_stdin_accepts(got, want):
    assert lcb.stdin_match(got, want)


@pytest.mark.parametrize(
    ("got", "want"),
    [
        ("0.333333\n", "0.3333333\n"),  # no tolerance: Decimals must be equal
        ("1\n\n2\n", "1\n2\n"),  # an inner blank line is a line
        ("1 2\n", "1\n2\n"),  # line structure matters
        ("Yes\n", "YES\n"),  # text is compared exactly
        ("hello  world\n", "hello world"),  # ... spaces inside a text line too
        ("nan\n", "NaN\n"),  # Decimal NaNs never compare equal
    ],
)
def test_lcb_stdin_rejects(got, want):
    assert not lcb.stdin_match(got, want)


def test_lcb_call_check_is_equality_after_tuple_to_list():
    """grade_call_based: a tuple result is a list; no float tolerance, no nested conversion."""
    assert lcb.call_check(lambda a, b: (a, b), [1, 2], [1, 2]) == (True, [1, 2])
    assert lcb.call_check(lambda: 0.1 + 0.2, [], 0.3)[0] is False
    assert lcb.call_check(lambda: [(1, 2)], [], [[1, 2]])[0] is False
    assert lcb.call_check(lambda x: x * 2, [21], 42) == (True, 42)


def test_lcb_prelude_is_the_runner_import_block():
    program = lcb.prelude("print(gcd(4, 6))\n", "stdin")
    assert program.startswith("from string import *\n")
    assert "sys.setrecursionlimit(50000)\n" in program and program.endswith("print(gcd(4, 6))\n")
    assert lcb.prelude("x = 1\n", "call") == lcb.IMPORTS + lcb.INT_DIGITS + "x = 1\n"
    namespace: dict = {}
    exec(compile(lcb.prelude("xs: List[int] = [3, 1]\n", "call"), "p", "exec"), namespace)
    assert namespace["xs"] == [3, 1]  # List comes from `from typing import *`


# --- TACO: testing_util.compare_std_results on a string ------------------------------------


@pytest.mark.parametrize(
    ("got", "want"),
    [
        ("3\n", "3"),  # 1: equal once stripped
        ("a b\n\n\n", "a b"),
        ("5", "5.000001"),  # 2: digit characters, each close to an expected line
        ("12", "1\n2"),
        ("2 1", "1\n2"),  # 3: one-character tokens as sets: order and layout free
        ("12", "1 2"),  # ... a token's characters against a line's tokens
        ("1", "1.0000"),  # 4: the same, rounded to 3 places
    ],
)
def test_taco_stdin_accepts(got, want):
    """What TACO's cascade accepts when given the program's stdout as one string."""
    assert taco.stdin_match(got, want)


@pytest.mark.parametrize(
    ("got", "want"),
    [
        ("0.50\n", "0.5\n"),  # the float check iterates characters: '.' is not a float
        ("10 \n20\n", "10\n20\n"),  # inner whitespace differs and tokens are longer than one
        ("1 2\n", "1  2\n"),
        ("YES\n", "yes\n"),
        ("0.333333\n", "0.3333333\n"),
    ],
)
def test_taco_stdin_rejects(got, want):
    """Ambiguous by design, so cited: TACO's compare_std_results gets ``result.stdout`` (a
    str) from execute_std_code, so past the strip check it compares characters, not lines."""
    assert not taco.stdin_match(got, want)


def test_taco_call_check_unwraps_outputs_and_converts_dict_keys():
    """execute_cb_code after process_input_output."""
    assert taco.call_check(lambda xs: sum(xs), [[1, 2]], [3]) == (True, 3)  # outputs[0]
    assert taco.call_check(lambda xs: sum(xs), [[1, 2]], 3)[0]
    assert taco.call_check(lambda: (1, 2), [], [[1, 2]])[0]  # tuple, then outputs[0]
    assert taco.call_check(lambda: [(1, 2)], [], [[[1, 2]]])[0]  # list of tuples
    assert not taco.call_check(lambda: 0.1 + 0.2, [], [0.3])[0]
    # a dict argument gets int keys (and becomes the only argument); so does a dict output
    assert taco.call_check(lambda d: {k * 2: v for k, v in d.items()}, [{"1": "a"}], {"2": "a"})[0]
    assert taco.call_check(lambda d: d, [{"x": 1}], [{"x": 1}])[0]  # keys that are not ints


def test_taco_prelude_goes_after_leading_imports():
    code = "from __future__ import annotations\nimport sys\n\nprint(sqrt(4))\n"
    program = taco.prelude(code, "stdin")
    assert program.startswith("from __future__ import annotations\nimport sys\n")
    assert program.index(taco.IMPORTS) < program.index("\nprint(sqrt(4))")
    assert "stdin = sys.stdin\nstdout = sys.stdout\n" in program
    assert taco.prelude("import os", "stdin") == "import os"  # only imports: nothing
    assert taco.prelude("x = 1\n", "call") == taco.IMPORTS + "x = 1\n"
    namespace: dict = {}
    exec(compile(taco.prelude("y = sqrt(16)\n", "call"), "p", "exec"), namespace)
    assert namespace["y"] == 4.0  # runs without numpy (its import is guarded)


# --- CodeContests: tester_sandboxer.cc OutputsMatch --------------------------------------------


@pytest.mark.parametrize(
    ("got", "want"),
    [
        ("yes\n", "YES\n"),  # SplitAndLowercase
        ("1\n2\n\n", "1 2"),  # tokens only
        ("0.50000", "0.5"),
        ("0.333333", "0.3333333"),  # |a - b| < 1e-5
        ("1e-7", "0"),
        ("+5", "5"),  # SimpleAtod takes a leading +
        ("1000000000000000000", "1000000000000000001"),  # both read as doubles
    ],
)
def test_codecontests_stdin_accepts(got, want):
    assert cc.stdin_match(got, want)


@pytest.mark.parametrize(
    ("got", "want"),
    [
        ("0.5001", "0.5"),
        ("1 2 3", "1 2"),
        ("inf 1.0", "inf 1"),  # ValuesMatch: |inf - inf| is NaN, not < 1e-5
        ("1_000", "1000"),  # no underscores in from_chars
        ("+-5", "-5"),
        ("0x10", "16"),
        ("yes\x0cno", "yes no"),  # form feed is not a separator
    ],
)
def test_codecontests_stdin_rejects(got, want):
    assert not cc.stdin_match(got, want)


def test_codecontests_values_match_numbers_and_strings():
    assert cc.values_match("nan(1)", "x") is False and cc.values_match("abc", "abc")
    assert cc.values_match("1e400", "1e401") is False  # both overflow to inf
    assert not cc.values_match("nan", "nan")  # two NaNs differ by NaN


# --- checkers for special-judge kinds -------------------------------------------------------


def test_checkers():
    assert checkers.tokens_casefold("Yes\nNO", "YES no")
    assert not checkers.tokens_casefold("Yes", "YES NO")
    assert checkers.tokens_close("3.1415927 x", "3.14159265 x")
    assert checkers.tokens_close("1000000.5", "1000000")  # relative 5e-7
    assert not checkers.tokens_close("0.001", "0.0011")
    assert checkers.tokens_close("nan", "nan") and not checkers.tokens_close("nan", "0")
    assert not checkers.tokens_close("inf", "1e308")
    assert set(checkers.CHECKERS) == {"case_insensitive", "float_tolerance"}


# --- limits, caps, release files, special-judge list ---------------------------------------


def test_limits_parse_the_sources_shapes():
    assert parse_seconds("2 seconds") == 2.0 and parse_seconds("1 second") == 1.0
    assert parse_seconds("0.5 seconds") == 0.5 and parse_seconds("500 ms") == 0.5
    assert parse_seconds(None) is None and parse_seconds("unknown") is None
    assert parse_seconds("0 seconds") is None and parse_seconds(3) == 3.0
    assert parse_megabytes("256 megabytes") == 256.0 and parse_megabytes("1 GB") == 1024.0
    assert parse_megabytes("65536 kilobytes") == 64.0 and parse_megabytes("") is None
    assert duration_seconds({"seconds": 2, "nanos": 500_000_000}) == 2.5
    assert duration_seconds({"seconds": 0, "nanos": 0}) is None
    assert duration_seconds(None) is None


def test_cap_tests_keeps_public_first_then_a_seeded_sample_in_order():
    public, private, generated = [1, 2], [10, 11, 12, 13, 14], [100, 101]
    assert cap_tests([public, private, generated], None, "k") == public + private + generated
    capped = cap_tests([public, private, generated], 5, "k")
    assert capped[:2] == public and len(capped) == 5 and set(capped[2:]) <= set(private)
    assert capped[2:] == sorted(capped[2:])  # source order kept
    assert cap_tests([public, private, generated], 5, "k") == capped  # seeded
    keys = {tuple(cap_tests([public, private], 4, f"k{i}")) for i in range(20)}
    assert len(keys) > 1  # the key picks which
    assert cap_tests([public, private], 1, "k") == [1]
    assert cap_tests([public, private], 7, "k") == public + private


def test_lcb_release_files_map_tags_as_the_loading_script():
    """code_generation_lite.py ALLOWED_FILES: cumulative releases, single versions, ranges."""
    assert lcb_release_files("release_v1") == ["test.jsonl"]
    assert lcb_release_files("release_v3") == ["test.jsonl", "test2.jsonl", "test3.jsonl"]
    assert lcb_release_files("release_latest") == lcb_release_files("release_v6")
    assert len(lcb_release_files("release_v6")) == 6
    assert lcb_release_files("v1") == ["test.jsonl"] and lcb_release_files("v5") == ["test5.jsonl"]
    assert lcb_release_files("v2_v4") == ["test2.jsonl", "test3.jsonl", "test4.jsonl"]
    assert lcb_release_files("v1_v2") == ["test.jsonl", "test2.jsonl"]
    for bad in ("release_v7", "v0", "v3_v3", "v4_v2", "latest", "v1_v7"):
        with pytest.raises(ValueError, match="version tag"):
            lcb_release_files(bad)


def test_taco_special_judge_list(tmp_path):
    """TACO's output_spj.jsonl: 218 of its 1000 test problems, by kind."""
    spj = taco_special_judges()
    assert len(spj) == 218 and spj[5] == "nondeterministic" and 0 not in spj
    assert spj[20] == "case_insensitive" and spj[18] == "float_tolerance"
    assert spj[382] == "unspecified"
    path = tmp_path / "spj.jsonl"
    path.write_text(
        '{"idx":0,"special_judge":false,"case":0}\n{"idx":1,"special_judge":true,"case":2}\n'
    )
    assert taco_special_judges(str(path)) == {1: "case_insensitive"}
