"""The public surface: __all__, py.typed, and `import servicebroker` never importing pyspark."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources

import servicebroker


def test_all_names_the_public_surface() -> None:
    expected = {
        "Broker",
        "Transaction",
        "Message",
        "Activation",
        "ActivationContext",
        "ManualClock",
        "SystemClock",
        "Clock",
        "END_DIALOG",
        "ERROR",
        "DIALOG_TIMER",
        "BrokerError",
        "CatalogError",
        "ConversationError",
        "IntegrityConflict",
        "MessageValidationError",
        "QueueDisabledError",
        "LockTimeoutError",
        "StorageError",
        "TransactionError",
        "parse_error_body",
    }
    assert set(servicebroker.__all__) == expected
    for name in servicebroker.__all__:
        assert getattr(servicebroker, name) is not None
    for error in ("CatalogError", "ConversationError", "QueueDisabledError", "StorageError"):
        assert issubclass(getattr(servicebroker, error), servicebroker.BrokerError)


def test_py_typed_ships() -> None:
    assert resources.files("servicebroker").joinpath("py.typed").is_file()


def test_import_does_not_load_pyspark() -> None:
    code = "import sys, servicebroker; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_public_callables_have_docstrings() -> None:
    from servicebroker import Broker, Transaction

    for cls in (Broker, Transaction):
        for name in dir(cls):
            if name.startswith("_"):
                continue
            attr = getattr(cls, name)
            if callable(attr) or isinstance(attr, property):
                assert (attr.__doc__ or "").strip(), f"{cls.__name__}.{name} has no docstring"
