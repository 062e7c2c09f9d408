"""Indian states and union territories with their GST state codes (first two digits of a GSTIN)."""

from django.db import models


class IndianState(models.TextChoices):
    JAMMU_AND_KASHMIR = "Jammu and Kashmir"
    HIMACHAL_PRADESH = "Himachal Pradesh"
    PUNJAB = "Punjab"
    CHANDIGARH = "Chandigarh"
    UTTARAKHAND = "Uttarakhand"
    HARYANA = "Haryana"
    DELHI = "Delhi"
    RAJASTHAN = "Rajasthan"
    UTTAR_PRADESH = "Uttar Pradesh"
    BIHAR = "Bihar"
    SIKKIM = "Sikkim"
    ARUNACHAL_PRADESH = "Arunachal Pradesh"
    NAGALAND = "Nagaland"
    MANIPUR = "Manipur"
    MIZORAM = "Mizoram"
    TRIPURA = "Tripura"
    MEGHALAYA = "Meghalaya"
    ASSAM = "Assam"
    WEST_BENGAL = "West Bengal"
    JHARKHAND = "Jharkhand"
    ODISHA = "Odisha"
    CHHATTISGARH = "Chhattisgarh"
    MADHYA_PRADESH = "Madhya Pradesh"
    GUJARAT = "Gujarat"
    DADRA_NAGAR_HAVELI_DAMAN_DIU = "Dadra and Nagar Haveli and Daman and Diu"
    MAHARASHTRA = "Maharashtra"
    KARNATAKA = "Karnataka"
    GOA = "Goa"
    LAKSHADWEEP = "Lakshadweep"
    KERALA = "Kerala"
    TAMIL_NADU = "Tamil Nadu"
    PUDUCHERRY = "Puducherry"
    ANDAMAN_AND_NICOBAR = "Andaman and Nicobar Islands"
    TELANGANA = "Telangana"
    ANDHRA_PRADESH = "Andhra Pradesh"
    LADAKH = "Ladakh"


GST_STATE_CODES: dict[str, str] = {
    IndianState.JAMMU_AND_KASHMIR: "01",
    IndianState.HIMACHAL_PRADESH: "02",
    IndianState.PUNJAB: "03",
    IndianState.CHANDIGARH: "04",
    IndianState.UTTARAKHAND: "05",
    IndianState.HARYANA: "06",
    IndianState.DELHI: "07",
    IndianState.RAJASTHAN: "08",
    IndianState.UTTAR_PRADESH: "09",
    IndianState.BIHAR: "10",
    IndianState.SIKKIM: "11",
    IndianState.ARUNACHAL_PRADESH: "12",
    IndianState.NAGALAND: "13",
    IndianState.MANIPUR: "14",
    IndianState.MIZORAM: "15",
    IndianState.TRIPURA: "16",
    IndianState.MEGHALAYA: "17",
    IndianState.ASSAM: "18",
    IndianState.WEST_BENGAL: "19",
    IndianState.JHARKHAND: "20",
    IndianState.ODISHA: "21",
    IndianState.CHHATTISGARH: "22",
    IndianState.MADHYA_PRADESH: "23",
    IndianState.GUJARAT: "24",
    IndianState.DADRA_NAGAR_HAVELI_DAMAN_DIU: "26",
    IndianState.MAHARASHTRA: "27",
    IndianState.KARNATAKA: "29",
    IndianState.GOA: "30",
    IndianState.LAKSHADWEEP: "31",
    IndianState.KERALA: "32",
    IndianState.TAMIL_NADU: "33",
    IndianState.PUDUCHERRY: "34",
    IndianState.ANDAMAN_AND_NICOBAR: "35",
    IndianState.TELANGANA: "36",
    IndianState.ANDHRA_PRADESH: "37",
    IndianState.LADAKH: "38",
}
