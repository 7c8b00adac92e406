"""The whole chain, counted in notifications, for a leaf going away inside a maintenance window,
and a host going away. The harness and what is asserted are test_alert_chain.py's; a fabric of its
own, so that they run side by side."""

import unittest

import test_alert_chain as chain


class MaintenanceChain(chain.AlertChain):
    faults = chain.HOST_FAULTS


if __name__ == "__main__":
    unittest.main(verbosity=2)
