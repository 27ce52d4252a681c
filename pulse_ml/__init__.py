"""pulse_ml: PULSE — conclusive A/B tests of AI-agent designs with few human ratings."""

__version__ = "0.1.0"
