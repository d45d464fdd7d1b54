"""Serve one saved model the way the HF inference DLC does, in the inference venv (see test_inference_image.py).

argv: model_dir, then a JSON object {"environment": {...}, "content_type": ..., "accept": ..., "body": ...}.
The model server's context (mms.context.Context, RequestProcessor) drives the toolkit's HuggingFaceHandlerService
exactly as multi-model-server calls it: initialize() loads /opt/ml/model into pipeline(HF_TASK), handle()
decodes the request, predicts and encodes the response. Prints `RESPONSE <json>`.
"""

import json
import os
import sys

model_dir, request = sys.argv[1], json.loads(sys.argv[2])
os.environ.update(request["environment"])

import transformers  # noqa: E402
import transformers.file_utils  # noqa: E402

# PyPI's toolkit 2.6.0 (the newest release) imports transformers.file_utils.is_tf_available, which transformers 5
# removed; the inference image installs the toolkit from a later commit (f0c3eb2) that no longer does. This one
# name is all that differs on the path exercised here, so it is supplied (TensorFlow: not available).
if not hasattr(transformers.file_utils, "is_tf_available"):
    transformers.file_utils.is_tf_available = lambda: False

from mms.context import Context, RequestProcessor  # noqa: E402
from sagemaker_huggingface_inference_toolkit.handler_service import HuggingFaceHandlerService  # noqa: E402

context = Context("model", model_dir, {}, 1, None, "1.1.11")
from mms.metrics.metrics_store import MetricsStore  # noqa: E402

context.metrics = MetricsStore({0: "request-0"}, "model")  # what the model server attaches to each request
context.request_processor = [RequestProcessor({"Content-Type": request["content_type"], "Accept": request["accept"]})]
service = HuggingFaceHandlerService()
service.initialize(context)
(response,) = service.handle([{"body": json.dumps(request["body"]).encode()}], context)
print("TRANSFORMERS", transformers.__version__)
print("RESPONSE " + (response.decode() if isinstance(response, bytes) else str(response)))
