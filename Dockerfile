# Concord server image: slim Python, non-root, embedded Valkey unless CONCORD_REDIS_URL is set.
# It installs the two Python distributions the way `make` and CI do, from the same pins
# (constraints.txt): concord-client (clients/python: client library, generated stubs) and
# concord-server (the root pyproject.toml), which requires it at the same version.
# tests/test_packaging.py builds wheels from exactly the files copied here, installs them
# into clean environments, serves locks from them and runs this image's HEALTHCHECK command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY clients/python ./clients/python
COPY service ./service
RUN pip install --no-cache-dir -c constraints.txt ./clients/python . && rm -rf /src

RUN useradd --create-home --uid 10001 concord && mkdir /data && chown concord /data
USER concord
WORKDIR /home/concord

# /data is where the embedded Valkey keeps its append-only file (CONCORD_DATA_DIR); the
# server itself writes nothing else. With CONCORD_REDIS_URL set it stays empty.
ENV CONCORD_LISTEN=0.0.0.0:50051 \
    CONCORD_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 50051

HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-m", "concord_server.healthcheck"]

ENTRYPOINT ["concord-server"]
