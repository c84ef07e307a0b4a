# syntax=docker/dockerfile:1
# Images for running Rendezvous at scale (see docker-compose.yml and README "Running at scale"):
#   web         the site and REST API, plus the queue's results worker (RDV_GRADING_BACKEND=procrastinate)
#   grader      a CPU grader worker (`python -m grader.worker --queue cpu`) and the sandbox image it
#               starts one locked-down container from per job (RDV_SANDBOX=docker)
#   grader-gpu  the same with PyTorch's CUDA build, for `--queue gpu` workers
# torch is pinned to the version the project is tested with. TORCH_PIP_ARGS lets a CPU-only build
# point pip at a CPU wheel index (e.g. --index-url <your CPU wheel mirror>).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG TORCH_VERSION=2.13.0

FROM ${PYTHON_IMAGE} AS python-base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /srv/rendezvous

# ---- grader workers and sandbox containers: only the grader package and what it imports ----
FROM python-base AS grader
ARG TORCH_VERSION
ARG TORCH_PIP_ARGS=""
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap \
 && rm -rf /var/lib/apt/lists/*
RUN pip install ${TORCH_PIP_ARGS} "torch==${TORCH_VERSION}" \
 && pip install "procrastinate>=2.0" "psycopg[binary]>=3.2" "pydantic>=2.7" \
                "ruamel.yaml>=0.18" "numpy>=1.26" "docker>=7.0"
COPY grader ./grader
ENV PYTHONPATH=/srv/rendezvous \
    RDV_SANDBOX=docker \
    RDV_SANDBOX_IMAGE=rendezvous-grader:latest \
    RDV_JOBS_DIR=/var/lib/rendezvous/jobs
# The worker talks to the Docker engine to start sandboxes (which run as nobody, no network).
ENTRYPOINT ["python", "-m", "grader.worker"]
CMD ["--queue", "cpu"]

FROM grader AS grader-gpu
ARG TORCH_VERSION
# PyPI's Linux torch wheel is the CUDA build; it replaces the CPU wheel of a TORCH_PIP_ARGS build.
RUN pip install --force-reinstall --no-deps "torch==${TORCH_VERSION}" \
 && pip install "torch==${TORCH_VERSION}"
ENV RDV_SANDBOX_IMAGE=rendezvous-grader-gpu:latest
CMD ["--queue", "gpu"]

# ---- the web app ----
FROM python-base AS web
ARG TORCH_VERSION
ARG TORCH_PIP_ARGS=""
RUN pip install ${TORCH_PIP_ARGS} "torch==${TORCH_VERSION}"
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY grader ./grader
RUN pip install -e . && pybabel compile -q -d app/locales -D messages
COPY migrations ./migrations
COPY lessons ./lessons
COPY templates ./templates
COPY static ./static
RUN useradd --system --uid 10001 --home-dir /srv/rendezvous rendezvous
USER rendezvous
ENV RDV_ENVIRONMENT=production \
    RDV_GRADING_BACKEND=procrastinate
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/', timeout=4)"
CMD ["python", "-m", "app", "serve", "--host", "0.0.0.0", "--port", "8000"]
