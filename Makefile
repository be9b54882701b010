# Two commands do everything on a fresh machine:
#   make demo   - set up, then analyse and optimise the bundled Tiny U-Net
#   make test   - set up, then run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
MODEL  ?= examples/models/tiny_unet.tflite
OUT    ?= build

.PHONY: setup demo test test-python test-native clean models-deps

# setuptools as pyproject.toml's build needs it: tests/test_tflite_tools_patch.py's venv sees this
# one's packages, its pip install of this repository too.
$(BIN)/tinyseg: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip "setuptools>=77"
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

setup: $(BIN)/tinyseg

demo: setup
	mkdir -p $(OUT)
	$(BIN)/tinyseg analyze $(MODEL) --plot $(OUT)/tiny_unet_plan.png --json $(OUT)/tiny_unet_analysis.json
	$(BIN)/tinyseg optimize $(MODEL) -o $(OUT)/tiny_unet_opt.tflite --report $(OUT)/tiny_unet_report.json --plot $(OUT)/tiny_unet_opt_plan.png

# The whole suite (scripts/test.sh): Debian packages, the third-party trees from
# ../shared/third_party unpacked into $(TINYSEG_BUILD_ROOT)/third_party (TFLM_DIR,
# TFLITE_TOOLS_DIR, ARDUINO_MBED_CORE_DIR; a value you set wins), the C++ core's suite,
# then the Python suite even when the first failed; non-zero exit if either failed.
TINYSEG_BUILD_ROOT ?= $(abspath ..)/.tinyseg-build/$(notdir $(CURDIR))
export TINYSEG_BUILD_ROOT

test:
	bash scripts/install-native-deps.sh
	$(MAKE) models-deps
	PYTHON_BIN=$(BIN)/python bash scripts/test.sh

test-python: setup
	bash scripts/install-native-deps.sh
	eval "$$(bash scripts/third-party-env.sh)" && $(BIN)/python -m pytest -q -rfEs

test-native:
	bash scripts/install-native-deps.sh
	TINYSEG_BUILD_DIR=$${TINYSEG_BUILD_DIR:-$(TINYSEG_BUILD_ROOT)/native} bash tflm_ops/run_tests.sh

clean:
	rm -rf $(VENV) $(OUT) build

# TensorFlow for examples/models/build.py, at the versions the committed models were built with
# (make test installs it too: the real-kernel check runs on the example models it builds).
models-deps: setup
	$(BIN)/pip install --quiet tensorflow-cpu==2.21.0 keras==3.15.1
