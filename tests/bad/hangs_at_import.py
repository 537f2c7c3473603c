"""Bad candidate: never finishes importing."""

import time

time.sleep(10**6)
