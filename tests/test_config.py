"""A bad configuration is one line naming the file and the setting, exit code 2, before any run
is opened: in analyze, batch and diff alike."""
import pytest

from tracelab.app import batch, engine, sources
from tracelab.app.cli import main
from tracelab.core.config import Config, load_config
from tracelab.core.errors import ConfigError

# (file content, what the error says after the file name)
BAD = {
    "unknown rule table": ("[tool.tracelab.rules.loss-spik]\nz = 3.0\n",
                           "unknown rule 'loss-spik' in [rules.loss-spik]; did you mean "
                           "'loss-spike'?"),
    "unknown rule table, nothing close": ("[tool.tracelab.rules.zzz]\n",
                                          "unknown rule 'zzz' in [rules.zzz]; `tracelab rules`"),
    "rule configured twice": ("[tool.tracelab.rules.loss-spike]\nz = 3.0\n"
                              "[tool.tracelab.rules.TL102]\nz = 4.0\n",
                              "rule loss-spike is configured twice"),
    "unknown key": ("[tool.tracelab]\nfail-onn = 'warning'\n",
                    "unknown key 'fail-onn'; did you mean 'fail-on'?"),
    "unknown threshold": ("[tool.tracelab.rules.loss-spike]\nwindw = 10\n",
                          "rule loss-spike has no threshold 'windw'; did you mean 'window'?"),
    "float for an int": ("[tool.tracelab.rules.loss-spike]\nwindow = 50.0\n",
                         "loss-spike.window = 50.0; expected an int like 50"),
    "string for a float": ("[tool.tracelab.rules.TL102]\nz = 'high'\n",
                           "loss-spike.z = 'high'; expected a float like"),
    "bool for a float": ("[tool.tracelab.rules.loss-spike]\nz = true\n",
                         "loss-spike.z = True; expected a float like"),
    "NaN threshold": ("[tool.tracelab.rules.loss-spike]\nz = nan\n",
                      "loss-spike.z = nan; expected a finite number"),
    "Inf threshold": ("[tool.tracelab.rules.loss-spike]\nz = inf\n",
                      "loss-spike.z = inf; expected a finite number"),
    "-Inf threshold": ("[tool.tracelab.rules.loss-spike]\nz = -inf\n",
                       "loss-spike.z = -inf; expected a finite number"),
    "bad fail-on": ("[tool.tracelab]\nfail-on = 'warnings'\n",
                    "fail-on = 'warnings'; expected one of error, warning, info, never"),
    "unknown selected rule": ("[tool.tracelab]\nselect = ['loss-spik']\n",
                              "select: unknown rule 'loss-spik'; did you mean 'loss-spike'?"),
    "unknown ignored rule": ("[tool.tracelab]\nignore = ['TL999']\n",
                             "ignore: unknown rule 'TL999'"),
    "select not a list": ("[tool.tracelab]\nselect = 'loss-spike'\n",
                          "'select' must be a list of rule names or codes"),
    "rules not tables": ("[tool.tracelab]\nrules = 3\n", "'rules' must be a table of tables"),
    "diff not a table": ("[tool.tracelab]\ndiff = 3\n", "'diff' must be a table"),
    "unknown diff key": ("[tool.tracelab.diff]\nrtoll = 1e-3\n",
                         "[diff] has no threshold 'rtoll'; did you mean 'rtol'?"),
    "diff float for an int": ("[tool.tracelab.diff]\nunique_min = 2.5\n",
                              "diff.unique_min = 2.5; expected an int like 10"),
    "diff string": ("[tool.tracelab.diff]\natol = '1e-8'\n",
                    "diff.atol = '1e-8'; expected a float like 1e-08"),
    "diff NaN": ("[tool.tracelab.diff]\nrtol = nan\n", "diff.rtol = nan; expected a finite"),
    "diff Inf": ("[tool.tracelab.diff]\nmean_shift = inf\n", "diff.mean_shift = inf; expected"),
    "diff negative": ("[tool.tracelab.diff]\nrtol = -1e-3\n",
                      "diff.rtol = -0.001; expected a number >= 0"),
    "negative rule threshold": ("[tool.tracelab.rules.loss-spike]\nz = -5.0\n",
                                "loss-spike.z = -5.0; expected a number >= 0"),
    "diff inverted band": ("[tool.tracelab.diff]\nstd_ratio_min = 3.0\n",
                           "diff.std_ratio_min = 3.0 is above diff.std_ratio_max = 2.0"),
}


@pytest.fixture
def no_work(monkeypatch):
    """Opening or discovering a run fails the test: the config must fail first."""
    def refuse(*args, **kwargs):
        raise AssertionError("a run was opened before the config was checked")
    monkeypatch.setattr(sources, "open_any", refuse)
    monkeypatch.setattr(batch, "discover", refuse)


def _args(command, tmp_path, config):
    run = str(tmp_path / "run")
    return {"analyze": ["analyze", run, "--config", config],
            "batch": ["batch", str(tmp_path), "-o", str(tmp_path / "out"), "--config", config],
            "diff": ["diff", run, str(tmp_path / "other"), "--config", config]}[command]


@pytest.mark.parametrize("command", ["analyze", "batch", "diff"])
@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_config_is_one_line_before_any_work(case, command, tmp_path, capsys, no_work):
    content, expected = BAD[case]
    config = tmp_path / "pyproject.toml"
    config.write_text(content)
    assert main(_args(command, tmp_path, str(config))) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"tracelab: error: {config}: ") and expected in captured.err
    assert captured.err.count("\n") == 1  # one line, no traceback
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]  # nothing written


def test_a_discovered_config_is_named_with_its_table(tmp_path, monkeypatch, capsys, no_work):
    (tmp_path / "pyproject.toml").write_text(BAD["unknown rule table"][0])
    monkeypatch.chdir(tmp_path)
    assert main(["analyze", "run"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'pyproject.toml'} [tool.tracelab]: unknown rule 'loss-spik'" in err


def test_a_tracelab_toml_is_checked_the_same_way(tmp_path, capsys, no_work):
    (tmp_path / "tracelab.toml").write_text("fail-on = 'sometimes'\n")
    assert main(["analyze", "run", "--config", str(tmp_path / "tracelab.toml")]) == 2
    assert "tracelab.toml: fail-on = 'sometimes'" in capsys.readouterr().err


def test_unknown_command_line_rules_fail_before_the_run_is_read(tmp_path, capsys, no_work):
    (tmp_path / "tracelab.toml").write_text("")
    assert main(["analyze", "run", "--config", str(tmp_path / "tracelab.toml"),
                 "--ignore", "loss-spik"]) == 2
    assert "ignore: unknown rule 'loss-spik'; did you mean 'loss-spike'?" in \
        capsys.readouterr().err


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "x"])
def test_bad_command_line_tolerances(value, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["diff", "a", "b", "--rtol", value])
    assert exit_.value.code == 2
    assert f"argument --rtol: {value!r}: expected a finite number >= 0" in capsys.readouterr().err


def test_a_good_config_loads_whole(tmp_path):
    (tmp_path / "tracelab.toml").write_text(
        "select = ['loss-spike', 'TL104']\nignore = ['TL303']\nfail-on = 'warning'\n"
        "[rules.loss-spike]\nz = 8\nwindow = 20\n[rules.TL104]\n"
        "[diff]\nrtol = 1e-3\nunique_min = 4\n")
    config = load_config(tmp_path / "tracelab.toml")
    assert config.check(engine.all_rules()) is config
    assert config.fail_on == "warning" and config.diff == {"rtol": 1e-3, "unique_min": 4}
    assert config.diff_thresholds().rtol == 1e-3 and config.diff_thresholds().atol == 1e-8
    spike = engine.find_rule("TL102")
    assert config.thresholds(spike) == {"z": 8, "window": 20}


def test_a_config_built_in_code_is_checked_by_the_engine():
    with pytest.raises(ConfigError, match=r"<config>: unknown rule 'loss-spik'"):
        engine.analyze("no/such/run", config=Config(rules={"loss-spik": {}}))
    with pytest.raises(ConfigError, match=r"<config>: fail-on = 'x'"):
        engine.analyze("no/such/run", config=Config(fail_on="x"))
    with pytest.raises(ConfigError, match=r"diff.rtol = nan"):
        engine.checked(Config(diff={"rtol": float("nan")}))
