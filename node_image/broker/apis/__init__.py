"""The broker's Kafka API handlers by concern, mixed into
:class:`~node_image.broker.kafka_apis.KafkaApis`."""
