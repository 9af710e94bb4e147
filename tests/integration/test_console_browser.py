"""The web console in a real headless browser: Debian's ``chromium``, driven by Selenium through
Debian's ``chromium-driver`` (``.ci/install-chromium.sh``), against ``pykraft dev
--controllers 1 --brokers 1``.

Why Selenium and not the DevTools protocol by hand: chromedriver starts, watches and stops the
browser, waits for page loads and takes screenshots in a few calls; a hand-written DevTools
client would need its own process management, target discovery and load events. Selenium is
told where chromedriver is, so its Selenium Manager never downloads a browser.

Every page is loaded, its real content asserted (the broker's id, the topic, the group's lag),
and a PNG screenshot written under ``tests/.artifacts/console/`` (printed; gitignored) for
people to look at. The brokers page shows the broker's MessagesInPerSec and BytesOutPerSec
above 0 after a produce and a read. Then records are produced and the pages show the new log end
offsets and lag.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from tests.integration.conftest import ROOT, dev_cluster

pytestmark = pytest.mark.integration

SCREENSHOTS = ROOT / "tests" / ".artifacts" / "console"
TOPIC = "console-orders"
GROUP = "console-readers"
PARTITIONS = 3
FIRST_RECORDS = 12
MORE_RECORDS = 7
TIMEOUT_S = 20.0
WIDTH = 1280
# The group page is opened with ?refresh=1 (it reloads itself every second): a few periods.
REFRESH_WAIT_S = 10.0
# The brokers table's columns of MessagesInPerSec and BytesOutPerSec.
MESSAGES_IN, BYTES_OUT = 7, 9


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("console") / "cluster"
    properties = ("offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0")
    with dev_cluster(data_dir, broker_properties=properties) as info:
        bootstrap = str(info["bootstrap_servers"])
        _create_topic(bootstrap)
        _produce(bootstrap, FIRST_RECORDS)
        _consume(bootstrap, FIRST_RECORDS)
        yield {
            "bootstrap": bootstrap,
            "console": f"{info['admin_url']}/console",
            "broker": str(info["brokers"][0]["node_id"]),
        }


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver_path = shutil.which("chromedriver")
    assert driver_path is not None, "chromedriver not found: run .ci/install-chromium.sh"
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", f"--window-size={WIDTH},900"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], request_timeout=TIMEOUT_S)
    futures[TOPIC].result(timeout=TIMEOUT_S)


def _produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(TOPIC, value=f"order-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0


def _consume(bootstrap: str, count: int) -> None:
    """Read ``count`` records in GROUP and commit them, then leave: the group stays, Empty."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    try:
        seen = 0
        while seen < count:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"read {seen} of {count} records"
            assert message.error() is None, message.error()
            seen += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _read_back(bootstrap: str, count: int) -> None:
    """Fetch ``count`` records of TOPIC from the start, by assignment: no group joined, no
    offset committed, so the broker's BytesOutPerSec moves and the group pages do not."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    try:
        seen = 0
        while seen < count:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"read {seen} of {count} records"
            assert message.error() is None, message.error()
            seen += 1
    finally:
        consumer.close()


def _load(browser: webdriver.Chrome, url: str, shot: str | None = None) -> str:
    browser.get(url)
    text = str(browser.find_element(By.TAG_NAME, "main").text)
    if shot is not None:
        height = int(browser.execute_script("return document.body.scrollHeight"))
        browser.set_window_size(WIDTH, max(600, min(height + 40, 4000)))
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(SCREENSHOTS / f"{shot}.png"))
    return text


def _rows(browser: webdriver.Chrome) -> list[list[str]]:
    return [
        [str(cell.text) for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in browser.find_elements(By.CSS_SELECTOR, "tbody tr")
    ]


def _group_lag(browser: webdriver.Chrome, url: str) -> tuple[int, int]:
    """(sum of LOG-END-OFFSET, sum of LAG) on the group's page, loaded now."""
    _load(browser, url)
    return _group_sums(browser)


def _reload_until(browser: webdriver.Chrome, url: str, done: Callable[[], bool]) -> None:
    """Reload ``url`` until ``done()``: the console serves a page's broker answer for
    ``console_kafka.CACHE_S`` (1 s), so a reload right after a produce may show the one before."""
    WebDriverWait(
        browser,
        REFRESH_WAIT_S,
        poll_frequency=0.25,
        ignored_exceptions=(StaleElementReferenceException, ValueError, AssertionError),
    ).until(lambda _: bool(_load(browser, url) is not None and done()))


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def _group_sums(browser: webdriver.Chrome) -> tuple[int, int]:
    rows = [row for row in _rows(browser) if row and row[0] == TOPIC]
    assert len(rows) == PARTITIONS, rows
    return sum(int(r[3].replace(",", "")) for r in rows), sum(int(r[4]) for r in rows)


def test_every_page_shows_the_live_cluster(cluster: dict[str, Any], browser: Any) -> None:
    console, broker = cluster["console"], cluster["broker"]
    print(f"\nconsole screenshots: {SCREENSHOTS}")
    overview = _load(browser, console, "overview")
    assert "Controllers" in overview and "leader" in overview
    assert _rows(browser)[1][:2] == [broker, "RUNNING"]  # the broker, after the controller row

    brokers = _load(browser, f"{console}/brokers")
    assert "RUNNING" in brokers and "PLAINTEXT://127.0.0.1:" in brokers
    # The rates come from the broker's heartbeats (every 2 s): each is the growth between the
    # last two, so it shows for one interval after the traffic. Records produced and read back
    # now; the page reloaded until both rates were seen above 0.
    _produce(cluster["bootstrap"], 1)
    _read_back(cluster["bootstrap"], FIRST_RECORDS + 1)
    seen: dict[str, float] = {}

    def rates_seen() -> bool:
        row = _rows(browser)[0]
        assert row[0] == broker, row
        for name, column in (("messages in", MESSAGES_IN), ("bytes out", BYTES_OUT)):
            if row[column] != "-":
                seen[name] = max(seen.get(name, 0.0), _number(row[column]))
        return seen.get("messages in", 0) > 0 and seen.get("bytes out", 0) > 0

    _reload_until(browser, f"{console}/brokers", rates_seen)
    _load(browser, browser.current_url, "brokers")

    topics = _load(browser, f"{console}/topics", "topics")
    assert TOPIC in topics
    assert [TOPIC, str(PARTITIONS), "1", "0", "0"] in _rows(browser)

    browser.find_element(By.LINK_TEXT, TOPIC).click()
    topic = _load(browser, browser.current_url, "topic")
    assert f"Topic {TOPIC}" in topic
    partitions = _rows(browser)
    assert [row[:5] for row in partitions] == [
        [str(p), broker, "0", broker, broker] for p in range(3)
    ]
    assert sum(int(row[5]) for row in partitions) == FIRST_RECORDS + 1

    groups = _load(browser, f"{console}/groups", "groups")
    assert [GROUP, "Empty", "0", "1"] in _rows(browser), groups

    group = _load(browser, f"{console}/groups/{GROUP}", "group")
    assert "State: Empty" in group
    assert _group_lag(browser, f"{console}/groups/{GROUP}") == (FIRST_RECORDS + 1, 1)

    journal = _load(browser, f"{console}/journal", "journal")
    assert "TopicRecord" in journal and TOPIC in journal and "RegisterBrokerRecord" in journal


def test_pages_follow_a_produce(cluster: dict[str, Any], browser: Any) -> None:
    """Reloaded by hand, then by the page's own auto-refresh (no navigation by the test)."""
    group_url = f"{cluster['console']}/groups/{GROUP}"
    ends_before, lag_before = _group_lag(browser, group_url)
    _produce(cluster["bootstrap"], MORE_RECORDS)
    _reload_until(browser, group_url, lambda: _group_sums(browser)[0] != ends_before)
    ends_after, lag_after = _group_sums(browser)
    assert (ends_after - ends_before, lag_after - lag_before) == (MORE_RECORDS, MORE_RECORDS)

    _load(browser, f"{group_url}?refresh=1")
    _produce(cluster["bootstrap"], MORE_RECORDS)
    expected = (ends_after + MORE_RECORDS, lag_after + MORE_RECORDS)
    WebDriverWait(
        browser,
        REFRESH_WAIT_S,
        ignored_exceptions=(StaleElementReferenceException, ValueError, AssertionError),
    ).until(lambda _: _group_sums(browser) == expected)
    _load(browser, browser.current_url, "group-after-produce")
