"""The whole chain, counted in notifications, for a host's cable and an uplink going down, and
symbol errors on the uplink. The harness and what is asserted are test_alert_chain.py's; a
fabric of its own, so that they run side by side."""

import unittest

import test_alert_chain as chain


class LinkChain(chain.AlertChain):
    faults = chain.LINK_FAULTS


if __name__ == "__main__":
    unittest.main(verbosity=2)
