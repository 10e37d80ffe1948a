"""Client byte-rate quotas metered as Kafka's ClientQuotaManager meters them: which entity's
quota applies and who shares it, the sampled rate and its window, the throttle that brings
the rate back to the quota, a throttled Fetch's bytes taken back, and a Fetch's cap."""
from node_image.quota_meter import FETCH, PRODUCE, QuotaMeter, Rate, resolve

U, C = "ANONYMOUS", "app"
LEVELS = [  # Kafka's order of precedence, most specific first, with the sensor's tags
    ((("client-id", C), ("user", U)), (U, C)),
    ((("client-id", None), ("user", U)), (U, C)),
    ((("user", U),), (U, "")),
    ((("client-id", C), ("user", None)), (U, C)),
    ((("client-id", None), ("user", None)), (U, C)),
    ((("user", None),), (U, "")),
    ((("client-id", C),), ("", C)),
    ((("client-id", None),), ("", C)),
]


def test_the_most_specific_entity_setting_the_key_applies():
    quotas = {entity: {PRODUCE: 1000.0 + i} for i, (entity, _) in enumerate(LEVELS)}
    for i, (entity, tags) in enumerate(LEVELS):
        assert resolve(quotas, PRODUCE, U, C) == (1000.0 + i, tags), entity
        del quotas[entity]
    assert resolve(quotas, PRODUCE, U, C) is None
    # an entity that sets only the other key is passed over; other names do not match
    quotas = {(("client-id", C),): {FETCH: 5.0}, (("client-id", "other"),): {PRODUCE: 6.0},
              (("user", "alice"),): {PRODUCE: 7.0}, (("client-id", None),): {PRODUCE: 8.0}}
    assert resolve(quotas, PRODUCE, U, C) == (8.0, ("", C))
    assert resolve(quotas, FETCH, U, C) == (5.0, ("", C))
    assert resolve(quotas, FETCH, U, None) is None, "a null client id matches only defaults"


def test_the_rate_is_taken_over_the_windows_but_one_until_more_time_has_passed():
    rate = Rate(samples=11, window_ms=1000)
    rate.record(5000, now=0)
    assert rate.window_size(0) == 10_000 and rate.measure(0) == 500.0
    rate.record(5000, now=2500)  # a new sample
    assert rate.window_size(2500) == 10_000 + 500 and rate.starts == [0, 2500]
    # at 12 s the first sample (11 s old) was emptied; the oldest began at 2.5 s: 9.5 s, at
    # least the ten windows and the part of the current one
    assert rate.measure(12_000) == 5000 / 10.5, "the first sample was emptied"
    assert rate.measure(13_500) == 0.0, "and then the second"


def test_a_client_over_its_quota_is_throttled_until_its_rate_is_back_at_the_quota():
    quotas = {(("client-id", C),): {PRODUCE: 1000.0}}
    meter = QuotaMeter(samples=11, window_ms=1000)
    assert meter.record(quotas, PRODUCE, U, C, 10_000, now=0) == 0, "exactly the quota"
    # 15,000 bytes over a 10 s window is 1,500/s: (1500 - 1000) / 1000 * 10 s
    assert meter.record(quotas, PRODUCE, U, C, 5000, now=0) == 5000
    assert meter.throttled == 1
    assert meter.record(quotas, PRODUCE, U, "other", 1 << 20, now=0) == 0, "no quota: free"
    assert meter.record(quotas, FETCH, U, C, 1 << 20, now=0) == 0, "nor for the other key"
    # 11 s later the first sample is emptied: the rate is back below the quota
    assert meter.record(quotas, PRODUCE, U, C, 100, now=11_000) == 0


def test_who_shares_a_rate_follows_the_entity_that_matched():
    user_quota = {(("user", U),): {PRODUCE: 1000.0}}
    meter = QuotaMeter()
    assert meter.record(user_quota, PRODUCE, U, "a", 8000, now=0) == 0
    assert meter.record(user_quota, PRODUCE, U, "b", 8000, now=0) > 0, "one user, one rate"
    default_client = {(("client-id", None),): {PRODUCE: 1000.0}}
    meter = QuotaMeter()
    assert meter.record(default_client, PRODUCE, U, "a", 8000, now=0) == 0
    assert meter.record(default_client, PRODUCE, U, "b", 8000, now=0) == 0, \
        "a default client-id quota is each client id's own"
    assert meter.record(default_client, PRODUCE, U, "a", 8000, now=0) > 0


def test_a_throttled_fetch_is_taken_back_and_a_fetch_is_capped_at_the_windows_but_one():
    quotas = {(("client-id", C),): {FETCH: 1000.0}}
    meter = QuotaMeter(samples=11, window_ms=1000)
    assert meter.max_bytes(quotas, FETCH, U, C) == 10_000
    assert meter.max_bytes(quotas, FETCH, U, "other") is None
    assert meter.record(quotas, FETCH, U, C, 9000, now=0) == 0
    assert meter.record(quotas, FETCH, U, C, 9000, now=100) > 0
    meter.unrecord(quotas, FETCH, U, C, 9000, now=100)
    assert meter.record(quotas, FETCH, U, C, 1000, now=200) == 0, "the 9,000 was taken back"
    zero = {(("client-id", C),): {PRODUCE: 0.0}}
    assert meter.record(zero, PRODUCE, U, C, 1, now=0) == 11_000, "a quota of 0 lets nothing by"


def test_rates_of_clients_idle_for_an_hour_are_forgotten():
    quotas = {(("client-id", None),): {PRODUCE: 1000.0}}
    meter = QuotaMeter()
    for i in range(100):
        meter.record(quotas, PRODUCE, U, f"c{i}", 10, now=0)
    meter.record(quotas, PRODUCE, U, "late", 10, now=3_000_000)
    assert len(meter._rates) == 101
    meter.record(quotas, PRODUCE, U, "late", 10, now=3_600_000)
    assert list(meter._rates) == [(PRODUCE, ("", "late"))], "the idle ones are gone"


def test_a_mutation_quota_refuses_once_the_bucket_is_below_zero_where_the_version_can_say_so():
    from node_image.mutation_quota import MutationQuota
    quotas = {(("client-id", C),): {"controller_mutation_rate": 5.0}}
    q = MutationQuota(samples=2, window_ms=1000)  # a bucket of 5 x 2 x 1 s = 10 tokens
    # in order: a (8) leaves 2, b (30) goes through and leaves -28, c is refused
    assert q.admit(quotas, U, C, [("a", 8), ("b", 30), ("c", 1)], strict=True, now=0) == (
        {"c"}, 5600)
    # 2.6 s later 13 tokens came back (-15): refused again, or taken where it cannot say so
    assert q.admit(quotas, U, C, [("d", 1)], strict=True, now=2600) == ({"d"}, 3000)
    assert q.admit(quotas, U, C, [("d", 1)], strict=False, now=2600) == (set(), 3200)
    # the bucket refills at 5 a second up to its 10
    assert q.admit(quotas, U, C, [("e", 10)], strict=True, now=60_000) == (set(), 0)
    assert q.admit(quotas, U, "other", [("f", 100)], strict=True, now=0) == (set(), 0)
