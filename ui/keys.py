"""Keyboard judging: keep the label keys working where Streamlit would swallow them, and say so when a key
is not taken.

Streamlit's button shortcuts (``st.button(shortcut=...)``) ignore a key while an ``INPUT`` has the focus,
and a radio button keeps the focus after it is chosen: after picking the campaign in the "Judge" picker,
0/1/2 did nothing until the annotator clicked elsewhere; after typing a rationale, the digit went into the
box. The script below (constant: no user data in it) gives the focus back to the page:

- after a radio button or checkbox is chosen;
- on Enter or Esc in a one-line text box (Streamlit commits the text on Enter first);

and when 0, 1 or 2 is typed into a text box (where it is text, not a label) it shows one line saying so
(``#qrs-key-hint``, for a few seconds).
"""
from __future__ import annotations

import streamlit as st

HINT_ID = "qrs-key-hint"  # the element of the hint (written out in the script below)
_SCRIPT = """
<script>
(function () {
  if (window.__qrsJudgingKeys) { return; }
  window.__qrsJudgingKeys = true;
  var textLike = function (el) {
    if (!el || !el.tagName) { return false; }
    if (el.isContentEditable || el.tagName === 'TEXTAREA') { return true; }
    return el.tagName === 'INPUT' && ['radio', 'checkbox', 'button', 'submit', 'range'].indexOf(el.type) < 0;
  };
  var release = function (el) { setTimeout(function () { if (document.activeElement === el) { el.blur(); } }, 0); };
  var hint = function (text) {
    var box = document.getElementById('qrs-key-hint');
    if (!box) {
      box = document.createElement('div');
      box.id = 'qrs-key-hint';
      box.setAttribute('role', 'status');
      box.style.cssText = 'position:fixed;bottom:1rem;left:50%;transform:translateX(-50%);z-index:100000;' +
        'background:#fff8c5;color:#3b2300;border:1px solid #d4a72c;border-radius:6px;padding:.5rem .9rem;' +
        'font:14px sans-serif;box-shadow:0 2px 8px rgba(0,0,0,.15)';
      document.body.appendChild(box);
    }
    box.textContent = text;
    box.style.display = 'block';
    clearTimeout(window.__qrsHintTimer);
    window.__qrsHintTimer = setTimeout(function () { box.style.display = 'none'; }, 4000);
  };
  document.addEventListener('change', function (e) {
    var t = e.target;
    if (t && t.tagName === 'INPUT' && (t.type === 'radio' || t.type === 'checkbox')) { release(t); }
  }, true);
  document.addEventListener('click', function (e) {
    var t = e.target && e.target.closest ? e.target.closest('[data-testid="stRadio"] label, [data-testid="stCheckbox"] label') : null;
    if (t) { setTimeout(function () {
      var a = document.activeElement;
      if (a && a.tagName === 'INPUT' && (a.type === 'radio' || a.type === 'checkbox')) { a.blur(); }
    }, 0); }
  }, true);
  document.addEventListener('keydown', function (e) {
    var t = e.target;
    if (!textLike(t) || e.ctrlKey || e.metaKey || e.altKey) { return; }
    if ((e.key === 'Enter' || e.key === 'Escape') && t.tagName === 'INPUT') { release(t); return; }
    if (e.key === '0' || e.key === '1' || e.key === '2') {
      hint('"' + e.key + '" went into the text box, not to a label: press Enter (or Esc) to leave the box, then ' +
           e.key + '.');
    }
  }, true);
})();
</script>
"""  # a constant: nothing from the dataset, the user or the URL goes into it (tests/test_security.py)


def judging_keys() -> None:
    """Install the focus handling for keyboard judging on this page (once per browser tab)."""
    st.html(_SCRIPT, unsafe_allow_javascript=True)
