"""The reply statuses are declared once (statuses.py) and agree in Lua."""

from importlib import resources

from concord_server import statuses


def test_status_lua_is_generated_from_statuses_py():
    lua = resources.files("concord_server").joinpath("lua", "include", "status.lua").read_text(encoding="utf-8")
    assert lua == statuses.lua_source(), "regenerate: python -m concord_server.statuses > .../lua/include/status.lua"


def test_statuses_within_a_family_are_distinct():
    for family in statuses.FAMILIES:
        values = list(family.members().values())
        assert len(values) == len(set(values)), family.__name__


def test_scripts_that_name_a_status_include_status_lua():
    names = [f.__name__ + "." for f in statuses.FAMILIES]
    for entry in resources.files("concord_server").joinpath("lua").iterdir():
        if not entry.name.endswith(".lua"):
            continue
        name, body = entry.name, entry.read_text(encoding="utf-8")
        if any(n in body for n in names):
            assert "--! include status.lua" in body, name
