# Concord server image: slim Python, non-root, embedded Valkey unless CONCORD_REDIS_URL is set.
# Its install step matches CI's: `make test` installs the same pins from constraints.txt, and
# tests/test_packaging.py installs this same non-editable package (stubs and Lua scripts
# included), serves locks from it and runs this image's HEALTHCHECK command against it.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY clients/python ./clients/python
COPY service ./service
RUN pip install --no-cache-dir -c constraints.txt . && rm -rf /src

RUN useradd --create-home --uid 10001 concord && mkdir /data && chown concord /data
USER concord
WORKDIR /home/concord

ENV CONCORD_LISTEN=0.0.0.0:50051 \
    CONCORD_DATA_DIR=/data
VOLUME ["/data"]
EXPOSE 50051

HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-m", "concord_server.healthcheck"]

ENTRYPOINT ["concord-server"]
