"""Headless Chromium for the browser tests, driven by selenium.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them). Without
them a test skips locally and fails in CI (``CI=true``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
INSTALL = "sudo apt-get install -y chromium chromium-driver"
# Quiet and offline: the machine's network is closed, so no background connections.
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-dev-shm-usage")


def chromium(window_size: str) -> Iterator[Any]:
    """Yield a driver of a fresh headless Chromium profile; quit and remove it after."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        message = f"{', '.join(missing)} not found: install them with `{INSTALL}`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="kgcheck-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--window-size={window_size}", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver: Any, seconds: float, condition: Callable[[Any], Any], message: str) -> Any:
    """Wait up to ``seconds`` for ``condition(driver)`` to be truthy; return its value."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds).until(lambda d: condition(d), message)
