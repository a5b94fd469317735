"""The privacy ledger: records, totals, budget refusal, JSON round trip."""
import json

import pytest
from dp_accounting import dp_event as dpe

from distdp.privacy import accounting as A
from distdp.privacy.ledger import BudgetExceededError, BudgetNotMetError, PrivacyLedger, Release


def ledger():
    led = PrivacyLedger()
    led.record(Release("M2", "gaussian", 1.4, 2.8, 1, A.gaussian_event(2.0), "replace-one document"))
    led.record(Release("power_iteration", "gaussian", "6‖u‖∞²", "50·(6‖u‖∞²)", 300, A.gaussian_event(50.0, 300)))
    led.record(Release("M3", "l2-vector", 0.1, 0.05, 1, A.pure_dp_event(0.5), note="counted as (ε, 0) RR"))
    led.record(Release("count", "laplace", 1, 4, 2, A.laplace_event(4.0, 2)))
    return led


def test_total_is_the_composition_of_all_releases():
    led = ledger()
    direct = A.epsilon_pld(A.compose(A.gaussian_event(2.0), A.gaussian_event(50.0, 300), A.pure_dp_event(0.5),
                                     A.laplace_event(4.0, 2)), 1e-6)
    assert led.epsilon(1e-6) == pytest.approx(direct)
    assert led.total(1e-6) == (pytest.approx(direct), 1e-6)
    assert led.epsilon(1e-6, "rdp") >= led.epsilon(1e-6) * 0.9


def test_json_round_trip_re_accounts_identically():
    led = ledger()
    text = json.dumps(led.to_dict(1e-6))
    back = PrivacyLedger.from_dict(json.loads(text))
    assert back.releases == led.releases
    assert back.epsilon(1e-6) == pytest.approx(led.epsilon(1e-6))
    assert json.loads(text)["epsilon_pld"] == pytest.approx(led.epsilon(1e-6))


def test_reserved_delta_is_taken_off_before_accounting_and_kept_in_json():
    # A propose-test-release check's failure probability δ0: the events are accounted at δ − δ0.
    led = ledger()
    led.reserve_delta(4e-7)
    assert led.epsilon(1e-6) == pytest.approx(ledger().epsilon(6e-7))
    assert led.epsilon(4e-7) == float("inf") and led.epsilon(3e-7) == float("inf")
    back = PrivacyLedger.from_dict(json.loads(json.dumps(led.to_dict(1e-6))))
    assert back.delta_reserved == 4e-7 and back.epsilon(1e-6) == pytest.approx(led.epsilon(1e-6))
    with pytest.raises(BudgetExceededError):
        led.check_budget(ledger().epsilon(1e-6), 1e-6)     # what fit at δ no longer fits at δ − δ0


def test_budget_that_cannot_be_met_is_refused():
    led = ledger()
    spent = led.epsilon(1e-6)
    assert led.check_budget(spent * 1.01, 1e-6) == pytest.approx(spent)
    with pytest.raises(BudgetExceededError, match="more than the budget"):
        led.check_budget(spent * 0.5, 1e-6)


def test_a_failed_run_says_it_counts_against_the_budget():
    # A failure after noisy releases is itself an output of them: the message says a rerun composes.
    for message in ("the noise swamps the signal", "the noise swamps the signal.  "):
        err = BudgetNotMetError(message)
        assert isinstance(err, ValueError)
        assert str(err) == "the noise swamps the signal." + BudgetNotMetError.SPENT
    assert "count it against the privacy budget" in BudgetNotMetError.SPENT and "composes" in BudgetNotMetError.SPENT


def test_unaccountable_releases_are_refused_when_recorded():
    led = PrivacyLedger()
    with pytest.raises(A.UnsupportedEventError):
        led.record(Release("x", "subsampled", 1, 1, 1, dpe.PoissonSampledDpEvent(0.1, dpe.GaussianDpEvent(1.0))))
    led.record(Release("leak", "none", 0, 0, 1, dpe.NonPrivateDpEvent()))
    with pytest.raises(ValueError, match="non-private"):
        led.epsilon(1e-6)
