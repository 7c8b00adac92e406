"""The whole chain, counted in notifications, for a congested spine port and a stuck receiver.
The harness and what is asserted are test_alert_chain.py's; a fabric of its own, so that they
run side by side."""

import unittest

import test_alert_chain as chain


class CounterChain(chain.AlertChain):
    faults = chain.COUNTER_FAULTS


if __name__ == "__main__":
    unittest.main(verbosity=2)
