"""The golden linearizations (tests/golden/gen_linearizations.py) are current: linearize still
builds the same backward body, keeps the same residuals and peels the same carry patterns
for each named body."""

import importlib.util
import os


def test_golden_linearizations_are_up_to_date(capsys):
    path = os.path.join(os.path.dirname(__file__), "golden", "gen_linearizations.py")
    spec = importlib.util.spec_from_file_location("gen_linearizations", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.main(["--check"]) == 0, capsys.readouterr().err
