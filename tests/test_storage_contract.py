"""The storage contract kit (servicebroker.testing.storage_kit) on every backend: one test per
check, each on a fresh database, so a failure names the broken part of the contract."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from servicebroker.storage import open_storage
from servicebroker.testing.storage_kit import (
    CHECKS,
    ContractViolation,
    StorageOpener,
    run_storage_contract,
)


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
def test_storage_contract(check: Callable[[StorageOpener], None], url: str) -> None:
    check(lambda: open_storage(url))


def test_the_whole_contract_on_one_database(url: str) -> None:
    run_storage_contract(lambda: open_storage(url))


def test_a_failed_check_is_named(url: str) -> None:
    def broken(open_storage: StorageOpener) -> None:
        raise ContractViolation("nothing works")

    with pytest.raises(ContractViolation, match=r"1 of 2 .*\n.*broken: ContractViolation"):
        run_storage_contract(lambda: open_storage(url), [CHECKS[0], broken])
