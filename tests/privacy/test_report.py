"""The privacy core's release helper (distdp.privacy.releases) and report type (distdp.privacy.report)."""
import json

import numpy as np
import pytest
from dp_accounting import dp_event as dpe

from distdp.privacy import accounting, mechanisms
from distdp.privacy.ledger import PrivacyLedger, Release
from distdp.privacy.neighbours import CHANGE_ONE_ENTRY, REPLACE_ONE_DOCUMENT
from distdp.privacy.releases import PrivateReleases
from distdp.privacy.report import COMMON_KEYS, PrivacyReport


def _releases(seed=0):
    return PrivateReleases(PrivacyLedger(), np.random.default_rng(seed), REPLACE_ONE_DOCUMENT)


CALLS = {
    "gaussian": lambda r: r.gaussian("g", np.zeros(5), 2.0, 0.5),
    "gaussian_noise": lambda r: r.gaussian_noise("gn", (3, 2), 2.0, 0.5),
    "symmetric_matrix": lambda r: r.symmetric_matrix("m", np.zeros((4, 4)), 2.0, 0.5),
    "symmetric_tensor": lambda r: r.symmetric_tensor("t", np.zeros((3, 3, 3)), 2.0, 0.5),
    "operator": lambda r: r.operator("o", 4, 2.0, 0.5).dense(),
    "laplace": lambda r: r.laplace("l", np.zeros(5), 2.0, 0.5),
    "symmetric_tensor_l2": lambda r: r.symmetric_tensor_l2("tl", np.zeros((3, 3, 3)), 4.0, 0.5, 2.0),
}
EVENTS = {"gaussian": dpe.GaussianDpEvent(4.0), "gaussian_noise": dpe.GaussianDpEvent(4.0),
          "symmetric_matrix": dpe.GaussianDpEvent(4.0), "symmetric_tensor": dpe.GaussianDpEvent(4.0),
          "operator": dpe.GaussianDpEvent(4.0), "laplace": dpe.LaplaceDpEvent(4.0),
          "symmetric_tensor_l2": accounting.pure_dp_event(2.0)}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_call_records_exactly_one_release_with_its_event(name):
    rec = _releases()
    CALLS[name](rec)
    (rel,) = rec.ledger.releases
    assert rel.dp_event == EVENTS[name] and rel.sensitivity == 0.5 and rel.count == 1
    assert rel.neighbour == str(REPLACE_ONE_DOCUMENT) and rel.sampler == mechanisms.SEEDED
    assert rel.noise_scale == (0.25 if name == "symmetric_tensor_l2" else 2.0)


def test_noise_is_drawn_with_the_same_generator_calls_as_the_mechanisms():
    """The helper is bit-identical to calling distdp.privacy.mechanisms directly on the same generator."""
    M, T, x = np.eye(4), np.ones((3, 3, 3)), np.arange(6.0)
    rec = _releases(7)
    got = [rec.symmetric_matrix("a", M, 0.3, 1.0), rec.symmetric_tensor("b", T, 0.3, 1.0),
           rec.gaussian("c", x, 0.3, 1.0), rec.laplace("d", x, 0.3, 1.0),
           rec.symmetric_tensor_l2("e", T, 2.0, 1.0, 2.0), rec.gaussian_noise("f", (2, 3), 0.3, 1.0)]
    rng = np.random.default_rng(7)
    want = [mechanisms.add_symmetric_matrix_noise(M, 0.3, rng), mechanisms.add_symmetric_tensor_noise(T, 0.3, rng),
            mechanisms.add_gaussian(x, 0.3, rng), mechanisms.add_laplace(x, 0.3, rng),
            T + mechanisms.symmetric_tensor_noise(3, 2.0, rng, "l2"), mechanisms.gaussian_noise((2, 3), 0.3, rng)]
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert [r.stage for r in rec.ledger.releases] == list("abcdef")


def test_explicit_multiplier_count_and_formula_are_recorded_as_given():
    rec = _releases()
    rec.gaussian("stage", np.zeros(3), 1.5, "2‖u‖∞²", multiplier=0.75, count=9, noise_scale="0.75 × Δ",
                 note="why")
    rec.gaussian("stage", np.zeros(3), 1.5, 2.0, record=False)            # a later release of the same stage
    (rel,) = rec.ledger.releases
    assert rel.dp_event == accounting.gaussian_event(0.75, 9) and rel.count == 9
    assert (rel.sensitivity, rel.noise_scale, rel.note) == ("2‖u‖∞²", "0.75 × Δ", "why")


def test_record_only_object_records_a_release_drawn_elsewhere():
    rec = PrivateReleases(PrivacyLedger(), None, CHANGE_ONE_ENTRY)
    rel = rec.record("sgd_steps", "gaussian", 0.2, 0.4, 30, accounting.gaussian_event(2.0, 3), "n", "s")
    assert rec.ledger.releases == [rel] and rel.neighbour == str(CHANGE_ONE_ENTRY) and rec.sampler("gaussian", 3) == ""


def _report(**kw):
    rec = _releases()
    rec.gaussian("M2", np.zeros(4), 2.0, 0.5)
    rec.laplace("test", 0.0, 1.0, 1.0)
    rec.ledger.reserve_delta(1e-9)
    base = dict(private=True, mechanism="agn", neighbour=REPLACE_ONE_DOCUMENT, epsilon=1.5, delta=1e-6,
                requested_epsilon=2.0, requested_delta=1e-6, accounting="pld", assumptions=("a",), notes=("n",),
                not_released=("x: y",), ledger=rec.ledger, details={"guarantee": "proven", "delta_reserved": 1e-9})
    return PrivacyReport(**{**base, **kw})


def test_to_dict_has_the_common_keys_first_then_the_details():
    d = _report().to_dict()
    assert tuple(d)[:len(COMMON_KEYS)] == COMMON_KEYS and list(d)[len(COMMON_KEYS):] == ["guarantee", "delta_reserved"]
    assert d["requested"] == {"epsilon": 2.0, "delta": 1e-6} and d["neighbour"]["name"] == "replace-one-document"
    assert json.loads(json.dumps(d)) == d


def test_to_dict_round_trips_its_ledger():
    r = _report()
    again = PrivacyReport.from_dict(json.loads(json.dumps(r.to_dict())))
    assert again == r
    assert again.ledger.releases == r.ledger.releases and again.ledger.delta_reserved == r.ledger.delta_reserved
    assert again.ledger.epsilon(1e-6) == r.ledger.epsilon(1e-6)
    assert [Release.from_dict(x) for x in r.to_dict()["ledger"]] == r.ledger.releases


def test_report_refuses_details_that_redefine_common_keys_and_untyped_neighbours():
    with pytest.raises(ValueError, match="epsilon"):
        _report(details={"epsilon": 3.0})
    with pytest.raises(TypeError):
        _report(neighbour="replace one document")


def test_report_without_a_ledger_writes_an_empty_one():
    d = PrivacyReport(private=False, mechanism="none", neighbour=CHANGE_ONE_ENTRY,
                      not_private_because=("no noise",)).to_dict()
    assert d["ledger"] == [] and d["epsilon"] is None and d["not_private_because"] == ["no noise"]
