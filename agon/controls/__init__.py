"""Controls: small simulations whose answer is known, run through the project's own code.

A control checks the algorithm rather than a model. It replaces the language models with a
system simple enough that what the duel *should* do to it can be worked out by hand, then
runs the real reward, advantage and loss functions on it and measures whether it does. A
positive control shows the effect the method claims, so a change that breaks the method
makes it fail; the tests that drive one also show that it *can* fail, by removing the
ingredient the effect needs and checking that the effect goes away.

- :mod:`agon.controls.tabular`: a duel of two tabular policies (a drafter choosing how its
  wrong drafts look, a reader choosing to copy or to verify), where the contest must turn
  the drafter adversarial and teach the reader to verify.
"""
