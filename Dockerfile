# pafka broker image: `docker build -t pafka .`; docker-compose.yml runs three of them against ZooKeeper.
FROM python:3.11-slim

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1

# A regular (non-editable) install compiles pafka's bytecode, so the broker starts in well under a second.
COPY . /tmp/pafka-src
RUN pip install /tmp/pafka-src \
    && rm -rf /tmp/pafka-src \
    && useradd --system --create-home --home-dir /var/lib/pafka pafka \
    && mkdir -p /var/lib/pafka/data \
    && chown -R pafka:pafka /var/lib/pafka

USER pafka
WORKDIR /var/lib/pafka
# The log dirs (meta.properties binds them to one cluster and broker id): one volume per broker.
VOLUME ["/var/lib/pafka"]
EXPOSE 9092

# Every Kafka property as `--override key=value` (or PAFKA_<PROPERTY> environment variables).
ENTRYPOINT ["pafka", "broker"]
CMD ["--override", "log.dirs=/var/lib/pafka/data", "--override", "listeners=PLAINTEXT://0.0.0.0:9092"]
