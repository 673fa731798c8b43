"""The golden loops (tests/golden/gen_loops.py) are current: the compiler still makes the
same program and prints the same source for each named body."""

import importlib.util
import os


def test_golden_loops_are_up_to_date(capsys):
    path = os.path.join(os.path.dirname(__file__), "golden", "gen_loops.py")
    spec = importlib.util.spec_from_file_location("gen_loops", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.main(["--check"]) == 0, capsys.readouterr().err
