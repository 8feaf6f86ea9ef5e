"""The public surface: __all__, py.typed, and `import servicebroker` never importing pyspark."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
from importlib import resources

import pytest

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
        "CertificateError",
        "ClockError",
        "RouteChoice",
        "ConversationError",
        "DatabaseUnavailableError",
        "DeadlockError",
        "IntegrityConflict",
        "Instance",
        "TSqlError",
        "MessageValidationError",
        "QueueDisabledError",
        "PermissionDeniedError",
        "DialogSecurityError",
        "LockTimeoutError",
        "StorageError",
        "StorageFullError",
        "StorageIOError",
        "StreamClaimError",
        "Outcome",
        "TransactionError",
        "TransportError",
        "TransportSettings",
        "FramingError",
        "parse_error_body",
    }
    assert set(servicebroker.__all__) == expected
    assert len(servicebroker.__all__) == len(expected)  # no name listed twice
    # ... and nothing public beyond it: every other top-level name is a submodule, private, or
    # the package's own `from __future__ import annotations`
    public = {
        name
        for name in dir(servicebroker)
        if not name.startswith("_")
        and name != "annotations"
        and not isinstance(getattr(servicebroker, name), types.ModuleType)
    }
    assert public == expected


def test_import_leaves_the_tsql_interpreter_until_instance_is_named() -> None:
    # a process that only sends and receives (a Spark worker) does not pay for the T-SQL stack
    probe = (
        "import sys, servicebroker; print('servicebroker.tsql' in sys.modules); "
        "servicebroker.Instance; print('servicebroker.tsql' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert out == ["False", "True"]
    with pytest.raises(AttributeError, match="no attribute 'Instanc'"):
        servicebroker.Instanc  # noqa: B018


def test_every_public_name_imports_and_is_documented() -> None:
    namespace: dict[str, object] = {}
    exec("from servicebroker import *", namespace)  # fails on a listed name that is not there
    del namespace["__builtins__"]
    assert set(namespace) == set(servicebroker.__all__)
    for name, value in namespace.items():
        if isinstance(value, str):
            continue  # the system message type names, checked below
        assert getattr(value, "__module__", "").startswith("servicebroker."), name
        doc = value.__doc__ or ""  # its own docstring, not one inherited from a base class
        assert doc.strip() and not doc.startswith(f"{name}("), f"{name} has no docstring"
    # rule SYS-1: the system message types, spelled exactly as SQL Server spells them
    assert servicebroker.END_DIALOG == "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
    assert servicebroker.ERROR == "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
    assert (
        servicebroker.DIALOG_TIMER == "http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer"
    )


def test_every_error_is_exported_and_under_broker_error() -> None:
    errors = importlib.import_module("servicebroker.errors")
    assert set(errors.__all__) <= set(servicebroker.__all__)
    for name in errors.__all__:
        error = getattr(servicebroker, name)
        assert error is getattr(errors, name)
        if name == "Outcome":  # the attribute of StorageError, not an error
            continue
        assert issubclass(error, servicebroker.BrokerError), name
    for storage_failure in (
        servicebroker.IntegrityConflict,
        servicebroker.DatabaseUnavailableError,
        servicebroker.StorageFullError,
        servicebroker.StorageIOError,
        servicebroker.DeadlockError,
    ):
        assert issubclass(storage_failure, servicebroker.StorageError)


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
