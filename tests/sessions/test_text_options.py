"""The session contract reads text columns without the model code (no scikit-learn import)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pulse_ml.models.text import TextFeatures
from pulse_ml.sessions.text_options import TEXT_DEFAULTS

REPO = Path(__file__).resolve().parents[2]


def test_text_features_takes_exactly_the_contracts_settings_and_defaults():
    assert TextFeatures().get_params() == dict(TEXT_DEFAULTS)


def test_validating_a_table_with_a_text_column_imports_no_model_code():
    code = (
        "import sys\n"
        "import pandas as pd\n"
        "from pulse_ml.sessions.feature_sets import feature_set_from_mapping\n"
        "from pulse_ml.sessions.table import validate_frame\n"
        "fs = feature_set_from_mapping({'name': 't', 'columns': {'user_text': {\n"
        "    'kind': 'text', 'encoders': ['stack', 'vader'], 'search_space': {\n"
        "        'stack_alpha': {'type': 'float', 'low': 0.3, 'high': 30}}}}})\n"
        "frame = pd.DataFrame({'session_id': ['a', 'b'], 'condition': 'x',\n"
        "                      'rating': [1.0, None], 'user_text': ['hi', None]})\n"
        "table = validate_frame(frame, 't.csv', fs)\n"
        "print(len(table.notes), sorted(m for m in sys.modules\n"
        "      if m.split('.')[0] == 'sklearn' or m.startswith('pulse_ml.models')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert out.stdout.strip() == "1 []", out.stdout
