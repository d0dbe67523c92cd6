"""What a handler hands back, made storable (executions.storable): pure functions, no database."""

from executions.storable import storable_json, storable_text


def test_text_keeps_what_it_can_and_writes_out_nul_and_lone_surrogates():
    assert storable_text("héllo 😀 \\u0000") == "héllo 😀 \\u0000"
    assert storable_text("a\x00b\ud83d") == "a\\u0000b\\ud83d"


def test_json_is_walked_keys_included_and_nan_becomes_a_string():
    value = {"a\x00": [1, 2.5, None, True, ("\udc00",)], "n": float("nan"), "i": float("inf")}

    assert storable_json(value) == {
        "a\\u0000": [1, 2.5, None, True, ["\\udc00"]],
        "n": "NaN",
        "i": "Infinity",
    }
    assert storable_json({"plain": ["x"]}) == {"plain": ["x"]}
