"""Operations: checks of what users hand the product, the sensor's monitoring, alerts to operators."""
