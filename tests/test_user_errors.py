"""errors.py: the user-error classes and the one-line warning format."""
import warnings

import pytest

from tensorforge.errors import InputError, MissingDependencyError, UsageError, UserError, format_warning, one_line


def test_user_errors_keep_their_builtin_bases_and_exit_codes():
    assert issubclass(InputError, ValueError) and issubclass(MissingDependencyError, ImportError)
    assert UserError("x").exit_code == 1 and UsageError("x").exit_code == 2
    from tensorforge.frontend.onnx import InputShapeError, ModelLoadError, UnsupportedOpsError
    for cls in (InputShapeError, ModelLoadError, UnsupportedOpsError):
        assert issubclass(cls, UserError)


def test_one_line_folds_a_listing():
    assert one_line("ops missing:\n  A: nodes a\n  B: nodes b\n") == "ops missing: A: nodes a; B: nodes b"
    assert one_line("first\nsecond") == "first; second" and one_line("") == ""


def test_warning_format_has_no_source():
    text = format_warning(RuntimeWarning("t.jsonl:3: skipped a bad record"), RuntimeWarning, "/x/records.py", 152,
                          "warnings.warn(...)")
    assert text == "tensorforge: warning: t.jsonl:3: skipped a bad record\n"
    assert format_warning("old", DeprecationWarning) == "tensorforge: warning: DeprecationWarning: old\n"


def test_show_warning_writes_one_line(capsys):
    from tensorforge.errors import show_warning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show_warning
        warnings.warn("careful\nreally", UserWarning, stacklevel=1)
    assert capsys.readouterr().err == "tensorforge: warning: careful; really\n"


def test_missing_optional_package_is_a_user_error(monkeypatch):
    import builtins

    from tensorforge.autotune import report
    real = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(MissingDependencyError, match="pip install"):
        report._pyplot()
