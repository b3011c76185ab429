#!/bin/bash
echo "tool 1.2.0"
