#!/bin/bash
exit 77
