"""Kafka message schemas kafka-python does not ship (KIP-853's voter changes, KIP-848's
and KIP-932's group APIs and records), in the JSON form of Kafka's own ``clients/src/main/resources/common/message`` files, loaded by
``node_image.kafka_codec`` through kafka-python's schema loader."""
