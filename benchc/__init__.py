"""benchc: a pytest-based structural-robustness regression suite for vision-language models.

Data flows one way, one subpackage per stage::

    data -> corruptions -> models -> results -> metrics -> gates / report

``benchc.spec`` holds the constants every stage agrees on (docs/spec.md §1-§6).
"""

__version__ = "0.1.0"
