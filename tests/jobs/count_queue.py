"""A PySpark job launched by the external activator: reads its queue through the servicebroker
data source, writes the count to OUT, then RECEIVEs the messages so the queue drains."""

import os
import sys

from servicebroker import Broker
from servicebroker.spark import session

url, queue, out = os.environ["SERVICEBROKER_URL"], os.environ["SERVICEBROKER_QUEUE"], sys.argv[1]
spark = session("local[1]", app_name="activated-job", temp_dir=os.path.dirname(out))
count = spark.read.format("servicebroker").option("url", url).option("queue", queue).load().count()
spark.stop()
with Broker.open(url) as broker:
    while True:
        with broker.transaction() as tx:
            if not tx.receive(queue):
                break
with open(out, "w") as f:
    f.write(str(count))
