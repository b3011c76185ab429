#!/bin/bash
python3 -c "import tiny_greeter; open('/app/out.txt', 'w').write(tiny_greeter.GREETING)"
